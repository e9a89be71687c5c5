//! Logging shim: the same macros log through `defmt` (targets), `log` (host) or nowhere.
//! Declared first in the crate so every module sees the macros.
#![allow(unused_macros)]

#[cfg(all(feature = "defmt", feature = "log"))]
compile_error!("features `defmt` and `log` are mutually exclusive");

macro_rules! trace {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::trace!($($arg)*);
        #[cfg(feature = "log")]
        ::log::trace!($($arg)*);
        #[cfg(not(any(feature = "defmt", feature = "log")))]
        { let _ = ($($arg)*); }
    }};
}

macro_rules! debug {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::debug!($($arg)*);
        #[cfg(feature = "log")]
        ::log::debug!($($arg)*);
        #[cfg(not(any(feature = "defmt", feature = "log")))]
        { let _ = ($($arg)*); }
    }};
}

macro_rules! info {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::info!($($arg)*);
        #[cfg(feature = "log")]
        ::log::info!($($arg)*);
        #[cfg(not(any(feature = "defmt", feature = "log")))]
        { let _ = ($($arg)*); }
    }};
}

macro_rules! warn {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::warn!($($arg)*);
        #[cfg(feature = "log")]
        ::log::warn!($($arg)*);
        #[cfg(not(any(feature = "defmt", feature = "log")))]
        { let _ = ($($arg)*); }
    }};
}

macro_rules! error {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        ::defmt::error!($($arg)*);
        #[cfg(feature = "log")]
        ::log::error!($($arg)*);
        #[cfg(not(any(feature = "defmt", feature = "log")))]
        { let _ = ($($arg)*); }
    }};
}
