//! [`step_enum!`]: the step enum of a hand-written test pipeline, the one
//! `#[pipeline]` would generate (tests that drive `leasehold-core` directly
//! cannot use the macro, which expands to the facade's paths).

/// Declares a step enum for a hand-written pipeline: the enum, `Display`,
/// `FromStr` (an unknown name is `UnknownStep` of `pipeline`) and
/// `leasehold_core::Steps`, variants in step order. The calling crate must
/// depend on `leasehold-core`.
///
/// ```ignore
/// leasehold_testkit::step_enum!(Step, "sync"; Fetch = "fetch", Load = "load");
/// ```
#[macro_export]
macro_rules! step_enum {
    ($name:ident, $pipeline:expr; $($variant:ident = $step:literal),+ $(,)?) => {
        /// The steps of the test pipeline, in order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        enum $name {
            $(
                #[doc = $step]
                $variant
            ),+
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(::leasehold_core::Steps::name(*self))
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::leasehold_core::UnknownStep;
            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                <Self as ::leasehold_core::Steps>::ALL
                    .iter()
                    .copied()
                    .find(|step| ::leasehold_core::Steps::name(*step) == s)
                    .ok_or(::leasehold_core::UnknownStep {
                        pipeline: $pipeline,
                        name: s.into(),
                    })
            }
        }

        impl ::leasehold_core::Steps for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];
            fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $step),+
                }
            }
            fn index(self) -> usize {
                self as usize
            }
        }
    };
}
