//! How far a response is committed, and which sealed call moves that point (contract §3.1): the commit decision,
//! pure, without the store, the clock or the toolbox, so that it can be checked exhaustively.

use std::collections::{BTreeSet, HashSet};

/// The committed prefix of one response, and what decides its next commit.
///
/// Content blocks `0..committed()` are durable. A call sealed past that point moves it (a prefix commit up to and
/// including the call) when the call is early, not admitted before, no call before it holds the prefix back (a call
/// that is not early, contract §3.1) and no block between the committed point and the call is still open.
#[derive(Debug)]
pub(super) struct Prefix {
    /// Leading content blocks already committed (contract §3).
    committed: usize,
    /// Prefix fragments committed so far (the terminal fragment is not one).
    prefixes: usize,
    /// The calls opened so far whose tool or stream made them early, by index.
    early: BTreeSet<usize>,
    /// The first call opened that is not early: no prefix can pass it.
    first_not_early: Option<usize>,
    /// Calls opened so far.
    calls_opened: usize,
    /// The first call past the per-response limit: it and every later call are refused at preparation (contract
    /// §4.6.4), so none is worth a durable commit of its own, and none is early.
    first_over_limit: Option<usize>,
    /// [`EngineConfig::max_calls_per_response`](crate::EngineConfig::max_calls_per_response).
    limit: Option<usize>,
    /// [`EngineConfig::early_execution`](crate::EngineConfig::early_execution).
    early_execution: bool,
    /// The calls some commit admitted, by id: a call is admitted once.
    admitted: HashSet<String>,
}

impl Prefix {
    /// Nothing committed yet, under a response's call limit and early-execution switch.
    pub(super) fn new(limit: Option<usize>, early_execution: bool) -> Self {
        Prefix {
            committed: 0,
            prefixes: 0,
            early: BTreeSet::new(),
            first_not_early: None,
            calls_opened: 0,
            first_over_limit: None,
            limit,
            early_execution,
            admitted: HashSet::new(),
        }
    }

    /// Leading content blocks already committed.
    pub(super) fn committed(&self) -> usize {
        self.committed
    }

    /// Prefix fragments committed so far.
    pub(super) fn prefixes(&self) -> usize {
        self.prefixes
    }

    /// A call opened at `index`; `early` is what its tool (or the stream's flag) says (contract §1.4).
    pub(super) fn opened_call(&mut self, index: usize, early: bool) {
        self.calls_opened += 1;
        if self.first_over_limit.is_none() && self.limit.is_some_and(|limit| self.calls_opened > limit) {
            self.first_over_limit = Some(index);
        }
        if early {
            self.early.insert(index);
        }
        if self.first_not_early.is_none() && !self.is_early(index) {
            self.first_not_early = Some(index);
        }
    }

    /// Whether the call at `index` may start before the stream ends: it was opened early and is within the limit.
    pub(super) fn is_early(&self, index: usize) -> bool {
        self.early.contains(&index) && self.first_over_limit.is_none_or(|first| index < first)
    }

    /// Whether the sealing of call `id` at `index` triggers a prefix commit up to it; `open_before` says whether a
    /// block between the committed point and `index` is still open.
    pub(super) fn triggers_commit(&self, index: usize, id: &str, open_before: bool) -> bool {
        self.early_execution
            && self.is_early(index)
            && !self.admitted.contains(id)
            && self.first_not_early.is_none_or(|first| first > index)
            && !open_before
    }

    /// Whether a commit admitted call `id` already.
    pub(super) fn is_admitted(&self, id: &str) -> bool {
        self.admitted.contains(id)
    }

    /// A commit admitted call `id`.
    pub(super) fn admitted(&mut self, id: String) {
        self.admitted.insert(id);
    }

    /// A prefix fragment ending with the call at `index` was committed.
    pub(super) fn prefix_committed(&mut self, index: usize) {
        self.committed = index + 1;
        self.prefixes += 1;
    }

    /// The terminal fragment, up to `end`, was committed.
    pub(super) fn terminal_committed(&mut self, end: usize) {
        self.committed = end;
    }
}

#[cfg(test)]
mod tests {
    use super::Prefix;

    /// A response's blocks, for the exhaustive check: `E` an early call, `S` a call that is not early, `T` text.
    const KINDS: [char; 3] = ['E', 'S', 'T'];

    /// The commit decision restated as directly as the contract words it (§3.1, §4.6.4): the call at `index` of
    /// `blocks` (all sealed, none admitted) triggers a commit when early execution is on, it is early and within
    /// the limit, and every call before it is early and within the limit.
    fn expected(blocks: &[char], index: usize, limit: Option<usize>, early_execution: bool) -> bool {
        let call_number = |at: usize| blocks[..=at].iter().filter(|kind| **kind != 'T').count();
        let early_within = |at: usize| blocks[at] == 'E' && limit.is_none_or(|limit| call_number(at) <= limit);
        early_execution && early_within(index) && (0..index).all(|at| blocks[at] == 'T' || early_within(at))
    }

    /// Every response of up to 5 blocks, under every limit up to 5 and both switches, sealed in order: each seal's
    /// decision is the contract's, and a commit moves the committed point past the call.
    #[test]
    fn every_short_response_commits_where_the_contract_says() {
        let responses = (0..=5u32).flat_map(|len| {
            (0..3usize.pow(len)).map(move |n| (0..len).map(|at| KINDS[n / 3usize.pow(at) % 3]).collect::<Vec<_>>())
        });
        let mut checked = 0;
        for blocks in responses {
            for limit in [None, Some(0), Some(1), Some(2), Some(3), Some(5)] {
                for early_execution in [true, false] {
                    let mut prefix = Prefix::new(limit, early_execution);
                    for (index, kind) in blocks.iter().enumerate() {
                        if *kind == 'T' {
                            continue;
                        }
                        prefix.opened_call(index, *kind == 'E');
                        let id = format!("c{index}");
                        let triggers = prefix.triggers_commit(index, &id, false);
                        assert_eq!(
                            triggers,
                            expected(&blocks, index, limit, early_execution),
                            "{blocks:?} at {index}, limit {limit:?}, early execution {early_execution}"
                        );
                        if triggers {
                            prefix.admitted(id.clone());
                            prefix.prefix_committed(index);
                            assert_eq!(prefix.committed(), index + 1);
                            assert!(!prefix.triggers_commit(index, &id, false), "a call is admitted once");
                        }
                        checked += 1;
                    }
                }
            }
        }
        // 1,094 calls in the 364 responses, under 12 settings.
        assert_eq!(checked, 1_094 * 12);
    }

    #[test]
    fn an_open_block_before_the_call_holds_the_commit_back() {
        let mut prefix = Prefix::new(None, true);
        prefix.opened_call(1, true);
        assert!(!prefix.triggers_commit(1, "c1", true));
        assert!(prefix.triggers_commit(1, "c1", false));
    }

    #[test]
    fn the_terminal_fragment_moves_the_committed_point_without_counting_a_prefix() {
        let mut prefix = Prefix::new(None, true);
        prefix.opened_call(0, true);
        prefix.prefix_committed(0);
        prefix.terminal_committed(4);
        assert_eq!((prefix.committed(), prefix.prefixes()), (4, 1));
        assert!(!prefix.is_admitted("c0"));
        prefix.admitted("c0".to_owned());
        assert!(prefix.is_admitted("c0"));
    }
}
