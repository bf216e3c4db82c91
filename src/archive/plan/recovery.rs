//! What an open does with the manifest it replayed: a pure function of how the current
//! generation's bytes ended, the evidence of records past its trusted prefix, and whether the
//! open may write (and was asked to repair). The executor (`engine/open.rs`) gathers the two
//! and carries the decision out: what is moved, written, or refused.

use crate::archive::format::manifest::log::Tail;

/// What the tail and the evidence say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every byte belongs to a record that passed its check, and nothing says a record past
    /// them was acknowledged.
    Clean,
    /// An interrupted append, never acknowledged: dropped by starting a new generation from
    /// the trusted prefix.
    Torn {
        /// Where the torn bytes start.
        offset: u64,
    },
    /// Damage: what follows the trusted prefix held acknowledged records (valid records after
    /// a failing one, bytes no writer writes, or evidence elsewhere in the archive).
    Damaged {
        /// Where the trusted prefix ends.
        offset: u64,
        /// What shows it, in words.
        why: String,
        /// Valid records found after the failing one, when that is what shows it.
        following: Option<usize>,
    },
}

/// The verdict on a generation whose trusted prefix is `trusted_len` bytes and ended as
/// `tail`, given the evidence past it (`evidence`: what it is, in words, if any).
pub(crate) fn verdict(tail: &Tail, trusted_len: u64, evidence: Option<String>) -> Verdict {
    match (tail, evidence) {
        (Tail::Damaged { offset, following }, _) => Verdict::Damaged {
            offset: *offset,
            why: format!("a record fails its check and {following} valid record(s) follow it"),
            following: Some(*following),
        },
        (Tail::Broken { offset, why }, _) => Verdict::Damaged {
            offset: *offset,
            why: why.clone(),
            following: None,
        },
        (tail, Some(why)) => Verdict::Damaged {
            offset: tail.offset().unwrap_or(trusted_len),
            why,
            following: None,
        },
        (Tail::Torn { offset }, None) => Verdict::Torn { offset: *offset },
        (Tail::Clean, None) => Verdict::Clean,
    }
}

/// What the open does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Read-only: hold the trusted prefix and change nothing (a damaged one refuses every
    /// read).
    Hold,
    /// Append to the current generation.
    Append,
    /// Start a new generation from the trusted prefix, the current one kept as evidence.
    NewGeneration,
    /// Restore the lost barriers whose files prove themselves, then start a new generation.
    Repair,
    /// Refuse to open for writing, changing nothing.
    Refuse,
}

/// What an open that may write (`writable`) and was or was not asked to repair does about
/// `verdict`.
pub(crate) fn action(verdict: &Verdict, writable: bool, repair: bool) -> Action {
    match (verdict, writable) {
        (_, false) => Action::Hold,
        (Verdict::Clean, true) => Action::Append,
        (Verdict::Torn { .. }, true) => Action::NewGeneration,
        (Verdict::Damaged { .. }, true) if repair => Action::Repair,
        (Verdict::Damaged { .. }, true) => Action::Refuse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evidence_makes_a_torn_or_clean_tail_damage() {
        let torn = Tail::Torn { offset: 40 };
        assert_eq!(verdict(&torn, 40, None), Verdict::Torn { offset: 40 });
        assert_eq!(
            verdict(&torn, 40, Some("a data file past it".into())),
            Verdict::Damaged {
                offset: 40,
                why: "a data file past it".into(),
                following: None
            }
        );
        assert_eq!(
            verdict(&Tail::Clean, 90, Some("x".into())),
            Verdict::Damaged {
                offset: 90,
                why: "x".into(),
                following: None
            }
        );
        assert_eq!(verdict(&Tail::Clean, 90, None), Verdict::Clean);
        let mid = Tail::Damaged {
            offset: 7,
            following: 3,
        };
        assert!(matches!(
            verdict(&mid, 7, None),
            Verdict::Damaged {
                offset: 7,
                following: Some(3),
                ..
            }
        ));
    }

    #[test]
    fn only_a_repair_writes_past_damage_and_a_reader_never_writes() {
        let damaged = Verdict::Damaged {
            offset: 1,
            why: String::new(),
            following: None,
        };
        let torn = Verdict::Torn { offset: 1 };
        for v in [&Verdict::Clean, &torn, &damaged] {
            assert_eq!(action(v, false, true), Action::Hold);
            assert_eq!(action(v, false, false), Action::Hold);
        }
        assert_eq!(action(&Verdict::Clean, true, false), Action::Append);
        assert_eq!(action(&torn, true, false), Action::NewGeneration);
        assert_eq!(action(&damaged, true, false), Action::Refuse);
        assert_eq!(action(&damaged, true, true), Action::Repair);
        assert_eq!(action(&Verdict::Clean, true, true), Action::Append);
    }
}
