//! What the backend and a node host exchange about exec: the signed job envelope and its
//! results ([`wire`]) with the files a command names ([`media`]), the facts a node reports
//! ([`report`]) and the backend's pre-check against them ([`facts`]), a paired node's record
//! ([`record`]) and its queue credentials ([`credentials`]). The node host depends on this
//! crate alone for all of it.

pub mod credentials;
pub mod facts;
pub mod media;
pub mod record;
pub mod report;
pub mod wire;
