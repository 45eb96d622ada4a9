//! One call of a script: its keys and arguments, built by the operation's
//! encoder, sent as `FCALL` of the script's function in the library (or as
//! `EVALSHA` where the server has no functions; see `Queue::invoke`).

use deadpool_redis::redis::{self, ToRedisArgs};

use super::scripts::LuaScript;

/// The keys and arguments of one call of a script.
pub(crate) struct ScriptCall<'a> {
    pub(crate) script: &'a LuaScript,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl<'a> ScriptCall<'a> {
    /// A call of `script` with no keys or arguments yet.
    pub(crate) fn new(script: &'a LuaScript) -> Self {
        ScriptCall {
            script,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// Appends a key (every part of it, as `redis` writes the value).
    pub(crate) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Appends an argument (every part of it, as `redis` writes the value).
    pub(crate) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// How many arguments the call has so far.
    pub(crate) fn arg_count(&self) -> usize {
        self.args.len()
    }

    /// The call as `FCALL <function> <numkeys> keys... args...`.
    pub(crate) fn fcall(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&self.script.function)
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }

    /// The call as an invocation of the script on its own (`EVALSHA`, loading
    /// it when the server does not have it).
    pub(crate) fn invocation(&self) -> redis::ScriptInvocation<'a> {
        let mut inv = self.script.eval.prepare_invoke();
        for key in &self.keys {
            inv.key(key);
        }
        for arg in &self.args {
            inv.arg(arg);
        }
        inv
    }
}
