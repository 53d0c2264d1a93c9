//! The HTML pages, one file each, and what they share: the page shell (`layout`) and a session's transcript
//! (`transcript`, which the live events send again as it grows).

pub mod fleet;
pub mod layout;
pub mod listing;
pub mod session;
pub mod transcript;
