//! A private certificate authority and a server certificate for
//! `localhost` / `127.0.0.1`, made with the `openssl` command in a temporary
//! directory, for the `rediss://` tests against a TLS redis-server.

use std::path::PathBuf;

/// The files of one fixture; the directory goes with it.
pub(crate) struct TlsFiles {
    _dir: tempfile::TempDir,
    /// The server certificate (signed by the CA).
    pub cert: String,
    /// The server key.
    pub key: String,
    /// The CA certificate a client trusts (through `SSL_CERT_FILE`).
    pub ca: String,
}

/// Makes the CA and the server certificate; `None` (and a line saying why)
/// when the `openssl` command is not installed.
pub(crate) fn make() -> Option<TlsFiles> {
    if std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: the openssl command is not installed (apt-get install openssl)");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_owned();
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let openssl = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=leasehold test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        "-out",
        "server.pem",
    ]);
    Some(TlsFiles {
        cert: path("server.pem"),
        key: path("server.key"),
        ca: path("ca.pem"),
        _dir: tmp,
    })
}
