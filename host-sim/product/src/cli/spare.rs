//! `spare add|remove`: hot spares of a pool.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::{Wait, request};
use super::console::{Console, Failure};
use crate::control::Request;
use crate::dir::Members;

/// Options of `spare`.
#[derive(Debug, Args)]
pub struct SpareArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: SpareAction,
}

/// The `spare` subcommands.
#[derive(Debug, Subcommand)]
pub enum SpareAction {
    /// Add a hot spare on a new blank image (a failed member waiting for one takes it).
    Add {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// The image's name in the pool directory (`disk<N>.img`; made the members' size if
        /// missing); default: the next free number.
        #[arg(long)]
        image: Option<String>,
        /// Print the status afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a hot spare (its image is kept).
    Remove {
        /// The pool directory.
        #[arg(long)]
        dir: PathBuf,
        /// The spare's image (`disk<N>.img`).
        #[arg(long)]
        image: String,
        /// Print the status afterwards as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs the `spare` subcommand.
pub fn run<M: Members>(a: &SpareArgs, members: impl Into<M>, con: Console) -> Result<(), Failure> {
    let (dir, json, req) = match &a.action {
        SpareAction::Add { dir, image, json } => (
            dir,
            *json,
            Request::SpareAdd {
                image: image.clone(),
            },
        ),
        SpareAction::Remove { dir, image, json } => (
            dir,
            *json,
            Request::SpareRemove {
                image: image.clone(),
            },
        ),
    };
    request::<M>(dir, members, &req, Wait::No, json, con).map(drop)
}
