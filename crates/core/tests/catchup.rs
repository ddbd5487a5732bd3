//! Catch-up against a model (`docs/catchup.md`): a store holds a random
//! state; the chain moves on by random inserts, updates and removes; a
//! catch-up to the new root, with the new tree's snapshot as the peer,
//! must commit a version that loads to exactly the new state and root (the
//! tree a full sync builds), write only the chunks, nodes and entries the
//! head did not hold, and leave the store holding exactly what its versions
//! reach, before and after the old version is pruned. Lying answers fail
//! with their codes and change nothing.

use std::collections::BTreeSet;

use bpavl_core::pages::{Paged, Pages};
use bpavl_core::record::{ChunkRecord, Ref, Table, VersionRecord};
use bpavl_core::{
    verify_chunk, verify_subtree, CatchUp, Fetch, ProofError, Snapshot, StoreError, StoreSync, Tree, TreeError,
    TreePath, WireNode, WriteSet, FORMAT_LEAVES, FORMAT_SUBTREE,
};
use bpavl_testkit::rng::SplitMix64;

mod model_keys;
mod store_kit;
use model_keys::{key, value};
use store_kit::{assert_no_garbage, be, committed, entries, random_states, Store};

const MAX_BYTES: usize = 8 << 20;

/// A peer that answers from `target`, with a lie applied to its answers.
struct Peer<'a> {
    target: &'a Snapshot,
    levels: u8,
    lie: Lie,
    /// The tag its subtrees are added with.
    tag: u32,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Lie {
    None,
    /// Flips a byte of a subtree, an entry-hash list, or an entry.
    FlipSubtree,
    FlipLeaves,
    FlipEntries,
    /// Answers with k = 0 entries.
    NoEntries,
    /// Changes every key copy (not hashed: only checked at the end).
    KeyCopies,
    /// Not a lie: serves no LEAVES or ENTRIES, so each changed chunk comes whole (CHUNK by index).
    Whole,
}

impl Peer<'_> {
    fn answer(&self, cu: &mut CatchUp, f: &Fetch) -> Result<(), ProofError> {
        match f {
            Fetch::Nodes(p) => match self.target.export_subtree(p, self.levels, MAX_BYTES) {
                Ok(mut b) => {
                    if self.lie == Lie::FlipSubtree {
                        let i = b.len() / 2;
                        b[i] ^= 1;
                    }
                    if self.lie == Lie::KeyCopies {
                        b = bend_key_copies(&b);
                    }
                    cu.add_subtree(p, self.levels, &b, self.tag)
                }
                Err(TreeError::ChunkOutOfRange) => {
                    let root = self.target.root();
                    let chunk = verify_chunk(&root, 0, &self.target.export_chunk_bytes(0).unwrap()).unwrap();
                    assert!(cu.add_top_chunk(chunk));
                    Ok(())
                }
                Err(e) => panic!("{e:?}"),
            },
            Fetch::Leaves(p) | Fetch::Entries(p, _) if self.lie == Lie::Whole => {
                let index = cu.chunk_index(p).expect("the path's left counts are known");
                let root = self.target.root();
                cu.add_chunk(p, verify_chunk(&root, index, &self.target.export_chunk_bytes(index).unwrap()).unwrap())
            }
            Fetch::Leaves(p) => {
                let mut b = self.target.export_leaves(p).unwrap();
                if self.lie == Lie::FlipLeaves {
                    *b.last_mut().unwrap() ^= 1;
                }
                cu.add_leaves(p, &b)
            }
            Fetch::Entries(p, bitmap) => {
                let mut b = self.target.export_entries(p, bitmap, MAX_BYTES).unwrap();
                if self.lie == Lie::FlipEntries {
                    *b.last_mut().unwrap() ^= 1;
                }
                if self.lie == Lie::NoEntries {
                    b = vec![0];
                }
                cu.add_entries(p, bitmap, &b)
            }
        }
    }
}

/// A subtree whose every key copy has its last byte changed (re-encoded
/// node by node: keys keep their lengths).
fn bend_key_copies(b: &[u8]) -> Vec<u8> {
    let mut out = b.to_vec();
    // Header: format byte and a capacity varint.
    let mut i = 1;
    while out[i] & 0x80 != 0 {
        i += 1;
    }
    i += 1;
    let varint = |out: &[u8], i: &mut usize| {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = out[*i];
            *i += 1;
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return v;
            }
        }
    };
    while i < out.len() {
        i += 1; // height
        varint(&out, &mut i);
        varint(&out, &mut i);
        i += 1 + 64; // kinds, two hashes
        let len = varint(&out, &mut i) as usize;
        out[i + len - 1] ^= 0x55;
        i += len;
    }
    out
}

/// Reads what the catch-up needs from the store until it needs nothing.
fn feed(cu: &mut CatchUp, store: &Store) -> Result<(), StoreError> {
    for _ in 0..10_000 {
        let needed = cu.needed()?;
        if needed.is_empty() {
            return Ok(());
        }
        for (t, r) in needed {
            cu.supply_record(&r, store.get(t, &r))?;
        }
    }
    panic!("reads are bounded");
}

fn put_all(store: &mut Store, puts: Vec<(Table, Ref, Vec<u8>)>) {
    for (t, r, bytes) in puts {
        store.table(t).insert(r.key().to_vec(), bytes);
    }
}

/// Runs `cu` to the end: store reads, records written, and every fetch handed to `answer`.
fn drive(cu: &mut CatchUp, store: &mut Store, mut answer: impl FnMut(&mut CatchUp, &Fetch)) {
    for _ in 0..100_000 {
        feed(cu, store).unwrap();
        put_all(store, cu.take_puts());
        if cu.is_fetched() && cu.needed().unwrap().is_empty() {
            return;
        }
        for f in cu.fetches(usize::MAX) {
            answer(cu, &f);
        }
    }
    panic!("a catch-up ends");
}

/// Catches the store's head up to `peer.target`, answering every fetch.
fn catch_up(store: &mut Store, head: &Tree, peer: &Peer) -> (WriteSet, Vec<u32>) {
    let mut cu = CatchUp::new(head, peer.target.root()).unwrap();
    drive(&mut cu, store, |cu, f| peer.answer(cu, f).unwrap());
    assert_changed_indices(&cu, store, head, peer.target);
    cu.finish().unwrap()
}

/// The chunk hashes of a snapshot, in chunk order.
fn chunk_hashes(snap: &Snapshot) -> Vec<[u8; 32]> {
    use bpavl_core::codec::Reader;
    use bpavl_core::hash::{chunk_hash, inchunk_tree};
    let mut out = Vec::new();
    let mut todo = vec![TreePath::top()];
    while let Some(p) = todo.pop() {
        if snap.export_subtree(&p, 1, MAX_BYTES).is_ok() {
            todo.extend([p.child(true), p.child(false)]); // the left one first
        } else if let Ok(b) = snap.export_leaves(&p) {
            let mut r = Reader::new(&b, FORMAT_LEAVES).unwrap();
            let m = r.chunk_size(snap.capacity()).unwrap();
            out.push(chunk_hash(m, &inchunk_tree(&r.hashes(m).unwrap())[0]));
        }
    }
    out
}

/// `changed_indices` of a fetched catch-up of `head` (perhaps paged: its
/// version is read whole from `store`) to `target`: the indices of the
/// target's chunks that no head chunk is, by hash.
fn assert_changed_indices(cu: &CatchUp, store: &Store, head: &Tree, target: &Snapshot) {
    let old = store.load(head.head().version(), head.capacity()).unwrap();
    let old: BTreeSet<[u8; 32]> = chunk_hashes(old.head()).into_iter().collect();
    let new = chunk_hashes(target);
    assert_eq!(new.len() as u64, target.chunk_count());
    let model: Vec<u64> = (0..new.len() as u64).filter(|&i| !old.contains(&new[i as usize])).collect();
    assert_eq!(cu.changed_indices(), Some(model));
    assert_eq!(cu.changed_indices().unwrap().len(), cu.changed_chunks());
}

/// Writes the caught-up version `v + 1`: it loads to exactly `target`, and
/// the store holds exactly what its versions reach, before and after `v` is pruned.
fn commit_and_check(store: &mut Store, ws: &WriteSet, v: u64, capacity: usize, target: &Tree, round: u64) {
    store.write(ws);
    let caught = store.load(v + 1, capacity).unwrap();
    assert_eq!(caught.head().root(), target.head().root(), "round {round}");
    assert_eq!(entries(&caught), entries(target), "round {round}");
    assert_no_garbage(store, capacity);
    store.prune(v + 1);
    assert_no_garbage(store, capacity);
}

/// A base state of `n` random writes, stored over a few commits; then the
/// chain's next state, `changes` random writes later.
fn states(rng: &mut SplitMix64, capacity: usize, n: usize, changes: usize) -> (Store, Tree, Tree) {
    random_states(rng, capacity, n, changes, false)
}

/// Round `round` of a model test: its capacity (2, 3, 4, 16, 64 in turn:
/// the larger ones make changed chunks deltas, and split chunks), `states`
/// at it, the stored head version `v`, loaded paged every other round, and
/// the target.
fn round_states(rng: &mut SplitMix64, round: u64, n: usize, changes: usize) -> (usize, Store, u64, Tree, Tree) {
    let capacity = [2, 3, 4, 16, 64][round as usize % 5];
    let (store, _, target) = random_states(rng, capacity, n, changes, bulk_round(round));
    let v = *store.version_numbers().last().unwrap();
    let head = store.load_as(v, capacity, round % 2 == 0).unwrap();
    (capacity, store, v, head, target)
}

/// Whether round `round` starts from a bulk load (every third round).
fn bulk_round(round: u64) -> bool {
    round % 3 == 1
}

/// A round of the model tests (`round_states`).
struct Round {
    n: usize,
    changes: usize,
    capacity: usize,
    store: Store,
    v: u64,
    head: Tree,
    target: Tree,
}

/// Round `round` of a model test: `n` base writes (1 … 400), then
/// `changes` of 0, 1, 3, n/20 + 1, n/3 + 1 or 2n in turn (each for
/// `rounds_each` rounds).
fn model_round(rng: &mut SplitMix64, round: u64, rounds_each: u64) -> Round {
    let n = 1 + rng.below(400) as usize;
    let changes = [0, 1, 3, n / 20 + 1, n / 3 + 1, 2 * n][(round / rounds_each) as usize % 6];
    let (capacity, store, v, head, target) = round_states(rng, round, n, changes);
    Round { n, changes, capacity, store, v, head, target }
}

fn hashes_of(store: &Store, t: Table, birth: u64) -> usize {
    store.records.get(&(t as u8)).map_or(0, |r| r.keys().filter(|k| k[..8] == birth.to_be_bytes()).count())
}

#[test]
fn a_catch_up_commits_exactly_the_new_tree_and_shares_the_rest() {
    let mut rng = SplitMix64::new(11);
    for round in 0..240u64 {
        let Round { n, changes, capacity, mut store, v, head, target } = model_round(&mut rng, round, 4);
        // At least 2 (`CatchUp::add_subtree`): a node whose kinds its inner child proves comes with it.
        let levels = [2, 3, 5, 48][(round / 2) as usize % 4];
        let peer = Peer { target: target.head(), levels, lie: Lie::None, tag: 1 };
        let (ws, liars) = catch_up(&mut store, &head, &peer);
        assert!(liars.is_empty());
        assert_eq!(ws.version, v + 1);
        store.write(&ws);

        let caught = store.load(v + 1, capacity).unwrap();
        assert_eq!(caught.head().root(), target.head().root(), "round {round}");
        assert_eq!(entries(&caught), entries(&target), "round {round}");
        assert_no_garbage(&store, capacity);

        // Only what the head lacked was written.
        let old = store.load(v, capacity).unwrap();
        let (old_sets, new_sets) = (record_hashes(&old), record_hashes(&target));
        assert_eq!(
            hashes_of(&store, Table::Chunks, v + 1),
            new_sets[0].difference(&old_sets[0]).count(),
            "round {round}"
        );
        assert_eq!(
            hashes_of(&store, Table::Nodes, v + 1),
            new_sets[1].difference(&old_sets[1]).count(),
            "round {round}"
        );
        let (fetched, new) = (hashes_of(&store, Table::Entries, v + 1), new_sets[2].difference(&old_sets[2]).count());
        // A one-chunk tree comes whole, as a chunk envelope: its entries are all written again.
        // Values that a bulk-loaded head's chunk records hold are fetched again when they move.
        let moved = if bulk_round(round) { new_sets[2].intersection(&old_sets[2]).count() } else { 0 };
        assert!(
            fetched <= new + moved || target.chunk_count() == 1,
            "round {round} C {capacity} n {n} changes {changes}: {fetched} > {new}"
        );

        store.prune(v + 1);
        assert_no_garbage(&store, capacity);
        assert_eq!(entries(&store.load(v + 1, capacity).unwrap()), entries(&target));

        // The caught-up version moves on by a commit, and is pruned: every
        // record the commit's version uses is still there.
        let mut next = store.load(v + 1, capacity).unwrap();
        for _ in 0..changes {
            let k = rng.below((n as u64 * 2).max(4)) as u16;
            if rng.below(3) == 0 {
                next.remove(&key(k));
            } else {
                next.insert(&key(k), &value(k, rng.below(256) as u8)).unwrap();
            }
        }
        let (_, ws) = next.commit_to_store();
        store.write(&ws);
        store.prune(v + 2);
        assert_no_garbage(&store, capacity);
        assert_eq!(entries(&store.load(v + 2, capacity).unwrap()), entries(&next), "round {round}: after a commit");
    }
}

type Hashes = BTreeSet<[u8; 32]>;

/// The chunk, node and entry hashes of a committed tree, read through
/// the catch-up answers.
fn record_hashes(tree: &Tree) -> [Hashes; 3] {
    use bpavl_core::codec::Reader;
    use bpavl_core::hash::{chunk_hash, inchunk_tree};
    let snap = tree.head();
    let (mut chunks, mut nodes, mut entries) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut todo = vec![TreePath::top()];
    while let Some(p) = todo.pop() {
        if let Ok(b) = snap.export_subtree(&p, 1, MAX_BYTES) {
            let mut r = Reader::new(&b, FORMAT_SUBTREE).unwrap();
            r.capacity().unwrap();
            nodes.insert(WireNode::read(&mut r).unwrap().hash());
            todo.extend([p.child(false), p.child(true)]);
        } else if let Ok(b) = snap.export_leaves(&p) {
            let mut r = Reader::new(&b, FORMAT_LEAVES).unwrap();
            let m = r.chunk_size(snap.capacity()).unwrap();
            let leaves = r.hashes(m).unwrap();
            chunks.insert(chunk_hash(m, &inchunk_tree(&leaves)[0]));
            entries.extend(leaves);
        }
    }
    [chunks, nodes, entries]
}

#[test]
fn every_lie_is_caught_and_changes_nothing() {
    let mut rng = SplitMix64::new(5);
    for (round, lie) in
        [Lie::FlipSubtree, Lie::FlipLeaves, Lie::FlipEntries, Lie::NoEntries].into_iter().cycle().take(40).enumerate()
    {
        let capacity = [2, 4][round % 2];
        let (mut store, _, target) = states(&mut rng, capacity, 200, 30);
        let v = *store.version_numbers().last().unwrap();
        let head = store.load_as(v, capacity, true).unwrap();
        let mut cu = CatchUp::new(&head, target.head().root()).unwrap();
        let liar = Peer { target: target.head(), levels: 3, lie, tag: 7 };
        let honest = Peer { target: target.head(), levels: 3, lie: Lie::None, tag: 1 };
        let mut caught = Vec::new();
        drive(&mut cu, &mut store, |cu, f| {
            // The liar answers first; what it got wrong is asked again of the honest peer.
            if let Err(e) = liar.answer(cu, f) {
                caught.push(e);
                honest.answer(cu, f).unwrap();
            }
        });
        let expected = match lie {
            Lie::FlipSubtree => &[ProofError::NodeMismatch, ProofError::FlagsInvalid, ProofError::HeightInvalid][..],
            Lie::FlipLeaves => &[ProofError::LeavesMismatch][..],
            Lie::FlipEntries => &[ProofError::EntryMismatch, ProofError::Truncated, ProofError::ValueTooLong][..],
            _ => &[ProofError::CountInvalid][..],
        };
        assert!(caught.iter().all(|e| expected.contains(e)), "{lie:?}: {caught:?}");
        let (ws, liars) = cu.finish().unwrap();
        // A flipped key copy hashes as before: it is blamed at the end instead.
        assert!(liars.iter().all(|&s| s == 7) && (lie == Lie::FlipSubtree || liars.is_empty()));
        assert!(!caught.is_empty() || !liars.is_empty(), "{lie:?}");
        commit_and_check(&mut store, &ws, v, capacity, &target, round as u64);
    }
}

#[test]
fn a_node_of_another_root_is_refused() {
    let mut rng = SplitMix64::new(9);
    let (store, tree, target) = states(&mut rng, 3, 300, 40);
    let (_, _, other) = states(&mut rng, 3, 300, 40);
    let v = *store.version_numbers().last().unwrap();
    let head = store.load_as(v, 3, true).unwrap();
    let mut cu = CatchUp::new(&head, target.head().root()).unwrap();
    let top = TreePath::top();
    for from in [other.head(), tree.head()] {
        let b = from.export_subtree(&top, 4, MAX_BYTES).unwrap();
        assert_eq!(cu.add_subtree(&top, 4, &b, 1), Err(ProofError::NodeMismatch));
    }
    assert_eq!(cu.fetches(usize::MAX), vec![Fetch::Nodes(top)]);
    assert_eq!(cu.fetches(0), vec![]);
}

#[test]
fn wrong_key_copies_are_blamed_and_never_used() {
    let mut rng = SplitMix64::new(3);
    for capacity in [2, 3, 4] {
        let (mut store, _, target) = states(&mut rng, capacity, 300, 60);
        let v = *store.version_numbers().last().unwrap();
        let head = store.load_as(v, capacity, false).unwrap();
        let peer = Peer { target: target.head(), levels: 2, lie: Lie::KeyCopies, tag: 7 };
        let (ws, liars) = catch_up(&mut store, &head, &peer);
        assert!(!liars.is_empty() && liars.iter().all(|&s| s == 7));
        commit_and_check(&mut store, &ws, v, capacity, &target, capacity as u64);
    }
}

/// Asks `Pages` until it answers, fetching from `store`.
fn paged<T>(store: &Store, pages: &mut Pages, mut ask: impl FnMut(&mut Pages) -> Paged<T>) -> T {
    for _ in 0..200 {
        match ask(pages) {
            Paged::Done(t) => return t,
            Paged::Need(records) => {
                for (t, r) in records {
                    pages.supply(t, &r, store.get(t, &r)).unwrap();
                }
            }
        }
    }
    panic!("a question takes a round per level and a few more");
}

#[test]
fn a_stored_version_serves_the_pieces_a_tree_in_memory_serves() {
    let mut rng = SplitMix64::new(21);
    for round in 0..24u64 {
        let capacity = [2, 3, 4, 16][round as usize % 4];
        let n = 1 + rng.below(300) as usize;
        let (mut store, _, target) = states(&mut rng, capacity, n, 40);
        let (_, ws) = target.clone().commit_to_store();
        store.write(&ws);
        let record = VersionRecord::decode(store.versions.values().last().unwrap(), capacity).unwrap();
        let snap = target.head();
        // A cache of two chunks: answers page chunks in and out.
        let mut pages = Pages::new(capacity, 0);
        let mut todo = vec![TreePath::top()];
        let mut asked = 0;
        while let Some(p) = todo.pop() {
            for levels in [1, 3] {
                let got = paged(&store, &mut pages, |pg| pg.export_subtree(record.top, &p, levels, MAX_BYTES).unwrap());
                assert_eq!(got.ok(), snap.export_subtree(&p, levels, MAX_BYTES).ok());
            }
            let leaves = paged(&store, &mut pages, |pg| pg.export_leaves(record.top, &p).unwrap());
            assert_eq!(leaves.clone().ok(), snap.export_leaves(&p).ok());
            if let Ok(l) = leaves {
                let m = (l.len() - 2) / 32;
                let bitmap = bpavl_core::positions_bitmap(&(0..m).step_by(2).collect::<Vec<_>>(), m);
                let got =
                    paged(&store, &mut pages, |pg| pg.export_entries(record.top, &p, &bitmap, MAX_BYTES).unwrap());
                assert_eq!(got.unwrap(), snap.export_entries(&p, &bitmap, MAX_BYTES).unwrap());
                let wrong =
                    paged(&store, &mut pages, |pg| pg.export_entries(record.top, &p, &[0xff; 9], MAX_BYTES).unwrap());
                assert_eq!(wrong, Err(TreeError::QueryInvalid));
                asked += 1;
            }
            if p.depth() < 12 && snap.export_subtree(&p, 1, MAX_BYTES).is_ok() {
                todo.extend([p.child(false), p.child(true)]);
            }
        }
        assert_eq!(asked as u64, snap.chunk_count());
        let beyond = TreePath::top().child(true).child(true).child(true).child(true).child(true).child(true);
        let none =
            paged(&store, &mut pages, |pg| pg.export_leaves(record.top, &beyond.child(false).child(false)).unwrap());
        assert!(snap.chunk_count() > 64 || none == Err(TreeError::ChunkOutOfRange));
    }
}

#[test]
fn a_resumed_catch_up_fetches_nothing_it_wrote_before() {
    let mut rng = SplitMix64::new(33);
    for round in 0..60u64 {
        let n = 50 + rng.below(400) as usize;
        let (capacity, mut store, v, head, target) = round_states(&mut rng, round, n, n / 4 + 1);
        let peer = Peer { target: target.head(), levels: 2, lie: Lie::None, tag: 1 };
        // A first run, stopped after a few rounds of answers: what it wrote stays, with its subtrees.
        let mut first = CatchUp::new(&head, target.head().root()).unwrap();
        let mut kept: Vec<(TreePath, u8, Vec<u8>)> = Vec::new();
        for _ in 0..=rng.below(6) {
            feed(&mut first, &store).unwrap();
            put_all(&mut store, first.take_puts());
            kept.extend(first.take_progress());
            for f in first.fetches(usize::MAX) {
                peer.answer(&mut first, &f).unwrap();
            }
        }
        feed(&mut first, &store).unwrap();
        put_all(&mut store, first.take_puts());
        kept.extend(first.take_progress());
        let written: BTreeSet<Vec<u8>> = store
            .records
            .get(&(Table::Chunks as u8))
            .map(|r| r.keys().filter(|k| k[..8] == (v + 1).to_be_bytes()).cloned().collect())
            .unwrap_or_default();
        // Damage one chunk it wrote: that one is fetched again.
        let damaged = written.iter().next().cloned();
        if let (Some(k), true) = (&damaged, round % 3 == 0) {
            let rec = store.table(Table::Chunks).get_mut(k).unwrap();
            *rec.last_mut().unwrap() ^= 1;
        }
        // The resume: kept subtrees first (in path order), then the rest from the peer.
        let mut cu = CatchUp::resume(&head, target.head().root()).unwrap();
        kept.sort_by(|a, b| (a.0.depth(), &a.0).cmp(&(b.0.depth(), &b.0)));
        for (p, levels, answer) in &kept {
            cu.restore_subtree(p, *levels, answer).unwrap();
        }
        let mut leaves_asked = BTreeSet::new();
        drive(&mut cu, &mut store, |cu, f| {
            if let Fetch::Nodes(p) = f {
                assert!(!kept.iter().any(|k| &k.0 == p), "round {round}: a kept subtree asked again");
            }
            if let Fetch::Leaves(p) = f {
                leaves_asked.insert(p.clone());
            }
            peer.answer(cu, f).unwrap();
        });
        let damaged_back = usize::from(round % 3 == 0 && damaged.is_some());
        assert_eq!(cu.restored_chunks() + damaged_back, written.len(), "round {round}");
        assert_eq!(
            cu.restored_chunks() + leaves_asked.len(),
            cu.changed_chunks(),
            "round {round}: a chunk both taken back and fetched"
        );
        assert_changed_indices(&cu, &store, &head, target.head());
        let (ws, liars) = cu.finish().unwrap();
        assert!(liars.is_empty());
        commit_and_check(&mut store, &ws, v, capacity, &target, round);
    }
}

#[test]
fn changed_chunks_that_come_whole_are_taken_as_well() {
    let mut rng = SplitMix64::new(44);
    for round in 0..80u64 {
        let n = 1 + rng.below(400) as usize;
        let (capacity, mut store, v, head, target) = round_states(&mut rng, round, n, n / 5 + 1);
        let peer = Peer { target: target.head(), levels: [2, 3, 48][round as usize % 3], lie: Lie::Whole, tag: 1 };
        let (ws, liars) = catch_up(&mut store, &head, &peer);
        assert!(liars.is_empty());
        let (old_sets, new_sets) = (record_hashes(&store.load(v, capacity).unwrap()), record_hashes(&target));
        commit_and_check(&mut store, &ws, v, capacity, &target, round);
        // Entries the head holds are still taken from it (those whose values a
        // bulk-loaded head's chunk records hold, unless they move).
        let (fetched, new) = (hashes_of(&store, Table::Entries, v + 1), new_sets[2].difference(&old_sets[2]).count());
        let moved = if bulk_round(round) { new_sets[2].intersection(&old_sets[2]).count() } else { 0 };
        assert!(fetched <= new + moved || target.chunk_count() == 1, "round {round}: {fetched} > {new}");
    }
}

/// Old chunks are checked by their group nodes when read, and their entry
/// hashes only where a hash is used as read: a slot is reused when its hash
/// equals a checked leaf, and any other slot's group is checked before its
/// entry is marked stale. A flipped entry hash (here in the last group of
/// the chunk an update changes) is therefore found, and never marks a
/// record stale; without that group check this catch-up succeeds.
#[test]
fn a_corrupt_entry_hash_in_an_old_chunk_is_found_before_it_is_marked_stale() {
    let capacity = 64;
    let (mut store, tree, version) = committed(capacity, 200);
    let mut next = tree.clone();
    next.insert(&key(0), &value(0, 2)).unwrap();
    next.commit();
    let target = next.head();
    let peer = Peer { target, levels: 4, lie: Lie::None, tag: 1 };
    // The last slot of the chunk of key 0 names another entry hash.
    let (mut bad, slots) =
        store.with_entry_hash_flipped(capacity, |s| (s[0].key.as_slice() == key(0).as_slice()).then(|| s.len() - 1));
    assert!(slots.len() > 16, "slot 0 and the last slot are in different groups");

    for (s, whole) in [(&mut store, true), (&mut bad, false)] {
        let head = s.load_as(version, capacity, true).unwrap();
        let mut cu = CatchUp::new(&head, target.root()).unwrap();
        let mut outcome = None;
        for _ in 0..1000 {
            if let Err(e) = feed(&mut cu, s) {
                outcome = Some(Err(e));
                break;
            }
            put_all(s, cu.take_puts());
            if cu.is_fetched() && cu.needed().unwrap().is_empty() {
                outcome = Some(cu.finish().map(|_| ()));
                break;
            }
            for f in cu.fetches(usize::MAX) {
                peer.answer(&mut cu, &f).unwrap();
            }
        }
        let expected = if whole { Ok(()) } else { Err(StoreError::Corrupt) };
        assert_eq!(outcome, Some(expected), "whole: {whole}");
    }
}

/// A changed chunk is written as a delta of the head's chunk it takes most
/// entries from, when that is small, as a commit writes it: of a full
/// record, or of the base of a delta. The base outlives the old version's
/// prune, and a resume takes such a delta back (its base read with it)
/// without fetching the chunk again.
#[test]
fn a_changed_chunk_is_written_as_a_delta_of_the_head_chunk_it_takes_from() {
    let capacity = 64;
    let (mut store, mut tree, mut v) = committed(capacity, 200);
    for round in 0..6u64 {
        let mut next = tree.clone();
        next.insert(&key(round as u16), &value(round as u16, 2 + round as u8)).unwrap();
        next.commit();
        let head = store.load_as(v, capacity, round % 2 == 0).unwrap();
        let peer = Peer { target: next.head(), levels: 4, lie: Lie::None, tag: 1 };
        let mut cu = CatchUp::new(&head, next.head().root()).unwrap();
        drive(&mut cu, &mut store, |cu, f| peer.answer(cu, f).unwrap());
        if round >= 3 {
            // Stopped before its last write: the resume takes the delta back.
            cu = CatchUp::resume(&head, next.head().root()).unwrap();
            drive(&mut cu, &mut store, |cu, f| {
                assert!(!matches!(f, Fetch::Leaves(_)), "round {round}: a stored chunk fetched again");
                peer.answer(cu, f).unwrap();
            });
            assert_eq!(cu.restored_chunks(), 1, "round {round}");
        }
        let (ws, _) = cu.finish().unwrap();
        let born: Vec<Vec<u8>> =
            store.table(Table::Chunks).iter().filter(|(k, _)| k[..8] == be(v + 1)).map(|(_, r)| r.clone()).collect();
        assert_eq!(born.len(), 1, "round {round}");
        let Ok(ChunkRecord::Delta(delta)) = ChunkRecord::decode(&born[0], capacity) else {
            panic!("round {round}: a delta record")
        };
        let base = store.get(Table::Chunks, &delta.base).expect("its base is stored");
        assert_eq!(delta.base.birth, 1, "round {round}: the bulk of the chunk is the first version's");
        assert!(4 * born[0].len() <= base.len(), "round {round}: {} of {}", born[0].len(), base.len());
        // The old version is pruned: the base stays, every record is reached.
        commit_and_check(&mut store, &ws, v, capacity, &next, round);
        (tree, v) = (next, v + 1);
    }
}

/// A chunk the new root splits in two: both halves take most of their
/// entries from it, but a base is named by one chunk of a version (so
/// that a commit that rewrites that chunk may mark the base stale): only
/// the half that holds the old chunk's first key is a delta of its base.
/// Rewriting that half whole afterwards, then pruning, leaves the other
/// half readable.
#[test]
fn a_split_chunk_names_its_base_once() {
    let capacity = 64;
    let mut tree = Tree::new(capacity).unwrap();
    let mut k = 0u16;
    while tree.chunk_count() < 2 {
        tree.insert(&key(k), &value(k, 1)).unwrap();
        k += 1;
    }
    // The right chunk filled to C entries: one more key splits it.
    let splits = |t: &Tree, k: u16| {
        let mut probe = t.clone();
        probe.insert(&key(k), &value(k, 1)).unwrap();
        probe.chunk_count() > 2
    };
    while !splits(&tree, k) {
        tree.insert(&key(k), &value(k, 1)).unwrap();
        k += 1;
    }
    let mut store = Store::default();
    let (commit, ws) = tree.commit_to_store();
    store.write(&ws);
    let v = commit.version;
    let mut target = tree.clone();
    let mut between = key(k - 16);
    between.push(b'z');
    target.insert(&between, b"new").unwrap();
    target.commit();
    assert_eq!(target.chunk_count(), 3);

    let head = store.load_as(v, capacity, true).unwrap();
    let peer = Peer { target: target.head(), levels: 4, lie: Lie::None, tag: 1 };
    let (ws, _) = catch_up(&mut store, &head, &peer);
    let bases: Vec<Ref> = store
        .table(Table::Chunks)
        .iter()
        .filter(|(key, _)| key[..8] == be(v + 1))
        .filter_map(|(_, r)| match ChunkRecord::decode(r, capacity) {
            Ok(ChunkRecord::Delta(d)) => Some(d.base),
            _ => None,
        })
        .collect();
    assert_eq!(bases.len(), 1, "one half is a delta of the old chunk's record: {bases:?}");
    commit_and_check(&mut store, &ws, v, capacity, &target, 0);

    // The left half rewritten whole (most of its values changed), then the caught-up version pruned.
    let mut next = store.load(v + 1, capacity).unwrap();
    for kk in k - 64..k - 40 {
        next.insert(&key(kk), &value(kk, 2)).unwrap();
    }
    let (_, ws) = next.commit_to_store();
    store.write(&ws);
    store.prune(v + 2);
    assert_no_garbage(&store, capacity);
    assert_eq!(entries(&store.load(v + 2, capacity).unwrap()), entries(&next));
}

/// A run of a sync as the head's next version (the catch-up of peers that
/// serve only whole chunks), from what the store kept: its progress records
/// by chunk index.
fn next_sync(
    store: &Store,
    head: &Tree,
    root: [u8; 32],
    first_key: Option<&[u8]>,
    progress: &std::collections::BTreeMap<u64, Vec<u8>>,
) -> StoreSync {
    let mut sync = StoreSync::next(head, root, first_key).unwrap();
    for (&i, p) in progress {
        let record = sync.chunk_ref(p).unwrap().and_then(|r| store.get(Table::Chunks, &r));
        let base = record.and_then(|r| sync.restore_base(r)).and_then(|b| store.get(Table::Chunks, &b));
        sync.restore(i, p, record, base).unwrap();
    }
    sync
}

/// Reads what the sync asks of the store and writes the chunks it makes,
/// until nothing waits.
fn write_ready(
    sync: &mut StoreSync,
    store: &mut Store,
    v: u64,
    progress: &mut std::collections::BTreeMap<u64, Vec<u8>>,
) {
    for round in 0.. {
        assert!(round < 1000, "the reads never end");
        for w in sync.take_ready() {
            store.write(&WriteSet { version: v + 1, puts: w.puts, ..WriteSet::default() });
            progress.insert(w.index, w.progress);
        }
        let needed = sync.needed();
        if needed.is_empty() {
            assert_eq!(sync.waiting_bytes(), 0);
            return;
        }
        for (t, r) in needed {
            sync.supply(&r, store.get(t, &r)).unwrap();
        }
    }
}

#[test]
fn a_sync_as_the_next_version_writes_only_chunks_the_head_lacks_and_resumes() {
    let mut rng = SplitMix64::new(44);
    let mut deltas = 0;
    for round in 0..120u64 {
        let Round { capacity, mut store, v, head, target, .. } = model_round(&mut rng, round, 2);
        let root = target.head().root();
        if target.chunk_count() == 0 {
            continue; // the empty tree: nothing to sync (a catch-up reaches it without a request)
        }
        // The head's smallest key, as the store reads it, in three rounds of four: its first chunk is shared then too.
        let first = entries(&store.load(v, capacity).unwrap()).into_keys().next().filter(|_| round % 4 != 3);
        let first_key = first.as_deref();
        let mut progress = std::collections::BTreeMap::new();
        let mut sync = StoreSync::next(&head, root, first_key).unwrap();
        let mut order: Vec<u64> = (0..target.chunk_count()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        // Chunks in a random order, written a few at a time; a kill now and then loses those not
        // written (fetched again at the end), and the next run takes back every chunk written.
        while progress.len() < order.len() {
            let todo: Vec<u64> = order.iter().copied().filter(|i| !progress.contains_key(i)).collect();
            for i in todo {
                if rng.below(6) == 0 {
                    sync = next_sync(&store, &head, root, first_key, &progress);
                    assert_eq!(sync.received(), progress.len() as u64, "round {round}");
                }
                let chunk = verify_chunk(&root, i, &target.head().export_chunk_bytes(i).unwrap()).unwrap();
                assert!(sync.add(chunk).unwrap().is_none(), "the write comes from take_ready");
                if rng.below(3) == 0 {
                    write_ready(&mut sync, &mut store, v, &mut progress);
                }
            }
            write_ready(&mut sync, &mut store, v, &mut progress);
        }
        // The head's replaced chunks read for their stale marks, written ahead; a kill meanwhile redoes them.
        for step in 0.. {
            assert!(step < 10_000, "round {round}: the reads never end");
            if rng.below(8) == 0 {
                sync = next_sync(&store, &head, root, first_key, &progress);
            }
            let needed = sync.stale_needed();
            if needed.is_empty() {
                break;
            }
            for (t, r) in needed {
                sync.stale_supply(&r, store.get(t, &r)).unwrap();
            }
            store.write(&WriteSet { version: v + 1, stale: sync.take_stale(), ..WriteSet::default() });
        }
        let ws = sync.finish().unwrap();
        assert_eq!(ws.version, v + 1);
        // Only chunks the head lacked were written (and the head's first chunk when its first key was
        // not given), and only entries the head lacked.
        let old = store.load(v, capacity).unwrap();
        let (old_sets, new_sets) = (record_hashes(&old), record_hashes(&target));
        let (written, lacked) = (hashes_of(&store, Table::Chunks, v + 1), new_sets[0].difference(&old_sets[0]).count());
        if first_key.is_some() || old.chunk_count() == 0 {
            assert_eq!(written, lacked, "round {round}");
        } else {
            assert!(written == lacked || written == lacked + 1, "round {round}");
        }
        // Inner nodes: exactly those the head lacked (the others are the head's, referenced), and, when the
        // head's first chunk is written again, its ancestors too (at most one a level).
        let written = ws.puts.iter().filter(|(t, ..)| *t == Table::Nodes).count();
        let lacked = new_sets[1].difference(&old_sets[1]).count();
        if first_key.is_some() {
            assert_eq!(written, lacked, "round {round}: nodes");
        } else {
            assert!(written >= lacked && written <= lacked + 48, "round {round}: nodes");
        }
        let (written, lacked) =
            (hashes_of(&store, Table::Entries, v + 1), new_sets[2].difference(&old_sets[2]).count());
        assert!(written >= lacked, "round {round}");
        assert!(
            written <= lacked || first_key.is_none(),
            "round {round} C {capacity}: {written} entries written, {lacked} new"
        );
        // Changed chunks that are deltas name head records, each named once, each small.
        let mut bases = std::collections::HashSet::new();
        let born: Vec<(Vec<u8>, Vec<u8>)> = store
            .table(Table::Chunks)
            .iter()
            .filter(|(k, _)| k[..8] == be(v + 1))
            .map(|(k, b)| (k.clone(), b.clone()))
            .collect();
        for (k, bytes) in &born {
            if let Ok(ChunkRecord::Delta(delta)) = ChunkRecord::decode(bytes, capacity) {
                assert!(delta.base.birth <= v && bases.insert(delta.base), "round {round}: {k:?}");
                let Ok(ChunkRecord::Full { slots, groups }) =
                    ChunkRecord::decode(store.get(Table::Chunks, &delta.base).unwrap(), capacity)
                else {
                    panic!("round {round}: a delta's base is a full chunk")
                };
                let (slots, _) = delta.apply(&slots, &groups, capacity).unwrap();
                let whole = bpavl_core::record::slots_len(&slots);
                assert!(4 * bytes.len() <= whole, "round {round}: a delta of {} bytes for {whole}", bytes.len());
                deltas += 1;
            }
        }
        commit_and_check(&mut store, &ws, v, capacity, &target, round);
    }
    assert!(deltas >= 20, "changed chunks written as deltas: {deltas}");
}

#[test]
fn a_sync_as_the_next_version_finishes_only_once_the_stale_reads_are_done() {
    let (mut store, head, v) = committed(4, 60);
    let mut target = head.clone();
    target.insert(&key(1000), &value(1000, 2)).unwrap();
    target.commit();
    let root = target.head().root();
    let mut sync = StoreSync::next(&head, root, None).unwrap();
    assert!(sync.stale_needed().is_empty(), "nothing to read before every chunk is in");
    for i in 0..target.chunk_count() {
        sync.add(verify_chunk(&root, i, &target.head().export_chunk_bytes(i).unwrap()).unwrap()).unwrap();
    }
    // The changed chunk waits for the head chunks around it; a head record that does not verify is STORE_CORRUPT.
    assert!(sync.waiting_bytes() > 0);
    assert!(sync.stale_needed().is_empty(), "nothing to mark while chunks wait");
    let mut corrupt = StoreSync::next(&head, root, None).unwrap();
    for i in 0..target.chunk_count() {
        corrupt.add(verify_chunk(&root, i, &target.head().export_chunk_bytes(i).unwrap()).unwrap()).unwrap();
    }
    let (_, r) = corrupt.needed()[0];
    let mut bad = store.get(Table::Chunks, &r).unwrap().to_vec();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(corrupt.supply(&r, Some(&bad)), Err(StoreError::Corrupt));
    assert_eq!(corrupt.supply(&r, None), Err(StoreError::Corrupt));
    assert!(
        corrupt.take_ready().iter().all(|w| w.puts.is_empty()),
        "only shared chunks: nothing written from a record that does not check"
    );
    write_ready(&mut sync, &mut store, v, &mut std::collections::BTreeMap::new());
    assert_eq!(sync.finish().err(), Some(bpavl_core::RebuildError::Incomplete));
    let needed = sync.stale_needed();
    assert!(!needed.is_empty());
    // A record the store lacks, or one that does not verify, is STORE_CORRUPT and marks nothing.
    let (t, r) = needed[0];
    assert_eq!(sync.stale_supply(&r, None), Err(StoreError::Corrupt));
    let mut bad = store.get(t, &r).unwrap().to_vec();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(sync.stale_supply(&r, Some(&bad)), Err(StoreError::Corrupt));
    assert!(sync.take_stale().is_empty());
}

/// A peer cuts a subtree to fit its limit, but never between a first node
/// of height 2 and 3 chunks and the inner child that proves its kinds
/// (`spec/catchup.md`, "Kinds"): asked 2 levels with room for no node at
/// all, it still sends both, and they check as proven.
#[test]
fn a_peer_never_cuts_a_subtree_before_the_child_that_proves_its_first_nodes_kinds() {
    let (_, tree, _) = committed(4, 200);
    let snap = tree.head();
    let top = TreePath::top();
    let all = verify_subtree(&top, &snap.root(), 48, 4, &snap.export_subtree(&top, 48, MAX_BYTES).unwrap()).unwrap();
    let (split, node, _) = all.nodes.iter().find(|(_, w, _)| w.height == 2 && w.chunks == 3).expect("such a node");
    for levels in [1u8, 2] {
        let cut = snap.export_subtree(split, levels, 1).unwrap();
        let got = verify_subtree(split, &node.hash(), levels, 4, &cut).unwrap();
        assert_eq!(got.nodes.len(), usize::from(levels), "levels {levels}");
        assert_eq!(got.nodes[0].2, levels == 2, "levels {levels}");
    }
}
