//! `import-eventd`: the library's importer ([`series_archive::eventd`]) with progress bars,
//! the lines it says on standard error, each barrier on standard output, and the automatic
//! maintenance at the end.

use crate::{lifecycle, progress, Failure};
use indicatif::ProgressBar;
use series_archive::archive::{Archive, BarrierReport, Ladder};
use series_archive::eventd::{self, ImportError, Progress};
use std::path::Path;

/// What `import-eventd` was asked.
pub struct Request<'a> {
    pub database: &'a Path,
    pub archive: &'a Path,
    pub seal_rows: u64,
    pub compact: bool,
    /// The ladder for new sample streams (an existing one keeps its own).
    pub ladder: Option<Ladder>,
}

/// The importer's refusals as the command's: a refused read of the archive exits 3 as every
/// reader's does, anything else 1 with the importer's own message.
fn failure(e: ImportError) -> Failure {
    match e {
        ImportError::Read(e) => crate::refused(e),
        other => Failure::from(other),
    }
}

pub fn import(req: Request) -> Result<(), Failure> {
    let mut shown = Shown::default();
    let config = crate::replica::replicating(lifecycle::with_cold(crate::config())?);
    let imported = eventd::import(
        eventd::Request {
            database: req.database,
            archive: req.archive,
            config,
            seal_rows: req.seal_rows,
            ladder: req.ladder,
        },
        &mut shown,
    );
    let mut imported = imported.map_err(failure)?;
    if req.compact {
        crate::maintain(&mut imported.archive)?;
    }
    crate::replica::stopped(&mut imported.archive);
    Ok(())
}

/// The import as a person sees it: a spinner while the database is checked, a bar while
/// rows are imported, the importer's lines on standard error, the barriers on standard
/// output.
#[derive(Default)]
struct Shown {
    checking: Option<ProgressBar>,
    bar: Option<ProgressBar>,
}

impl Shown {
    /// Runs `f` with the drawn bar, if any, out of the way.
    fn above(&self, f: impl FnOnce()) {
        match self.checking.as_ref().or(self.bar.as_ref()) {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }
}

impl Progress for Shown {
    fn checking(&mut self, database: &Path) {
        let checking = ProgressBar::new_spinner().with_message(format!(
            "checking {} (every sample, before anything is written)",
            database.display()
        ));
        checking.enable_steady_tick(std::time::Duration::from_millis(120));
        self.checking = Some(checking);
    }

    fn checked(&mut self) {
        if let Some(checking) = self.checking.take() {
            checking.finish_and_clear();
        }
    }

    fn opened(&mut self, archive: &Archive) {
        for q in &archive.recovery().quarantined {
            eprintln!(
                "recovery: moved {} into quarantine (kept as {q})",
                crate::quarantined_from(q)
            );
        }
    }

    fn note(&mut self, line: &str) {
        self.above(|| eprintln!("{line}"));
    }

    fn importing(&mut self, rows: u64, already: u64) {
        let bar = progress(rows, "importing", "{pos}/{len} rows");
        bar.set_position(already);
        self.bar = Some(bar);
    }

    fn staged(&mut self, rows: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(rows);
        }
    }

    fn sealed(&mut self, barrier: &BarrierReport) {
        let hidden;
        let bar = match &self.bar {
            Some(bar) => bar,
            None => {
                hidden = ProgressBar::hidden();
                &hidden
            }
        };
        crate::print_barrier(barrier, bar);
    }

    fn imported(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}
