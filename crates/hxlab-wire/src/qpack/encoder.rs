//! The QPACK encoder with a dynamic table (RFC 9204 §2.1, §4.3, §4.5): one per connection,
//! used by the origin for response heads and by the load client for request heads.
//!
//! Until the peer's SETTINGS arrive, and whenever our own limit or the peer's is 0, it
//! encodes with the static table only. After them it sets the capacity to the smaller of
//! the two (Set Dynamic Table Capacity on the encoder stream) and, for each field section:
//! - a field the static table has whole is one byte;
//! - a field the dynamic table has is referenced when the peer has acknowledged the entry,
//!   or when this stream may block (the section then waits at the peer for the insert);
//! - a field worth indexing ([`worth_indexing`]) that is not in the table yet is inserted
//!   (with a static or dynamic name reference, or a literal name) when room can be made by
//!   evicting only entries that are acknowledged and referenced by no unacknowledged section,
//!   and referenced if the stream may block;
//! - an entry about to be evicted (in the oldest quarter of the table) that is wanted again
//!   is duplicated, so it stays;
//! - anything else is a literal, with a name reference when one is at hand.
//!
//! A stream "may block" when it is already blocking, or when fewer streams than the peer's
//! SETTINGS_QPACK_BLOCKED_STREAMS would then be blocking: that budget is never exceeded.
//! Acknowledgements come back on the decoder stream ([`QpackEncoder::feed_decoder`]): Section
//! Acknowledgment and Insert Count Increment raise the Known Received Count, Stream
//! Cancellation drops a stream's sections. A peer that never acknowledges gets static and
//! literal fields once [`MAX_OUTSTANDING`] sections wait.

use super::decoder::{encode_required_insert_count, MAX_TABLE_CAPACITY};
use super::instruction::{
    read_decoder_instruction, write_encoder_instruction, DecoderInstruction, EncoderInstruction,
    Partial,
};
use super::table::{entry_size, DynamicTable};
use super::{write_str, QpackError, STATIC_TABLE};
use crate::prefix::write as write_int;
use std::collections::VecDeque;

/// The most field sections with dynamic references that may wait for acknowledgement; past
/// it new sections use the static table and literals only.
pub const MAX_OUTSTANDING: usize = 1000;

/// Whether a field is worth a dynamic-table entry: not a credential (those are never
/// indexed, RFC 9204 §7.1), and not so large that one entry would flush a quarter of the
/// table. Everything else is indexed (date and content-length included: they repeat between
/// responses of one second and of one object).
pub fn worth_indexing(name: &[u8], value: &[u8], capacity: u64) -> bool {
    !matches!(
        name,
        b"authorization" | b"proxy-authorization" | b"cookie" | b"set-cookie"
    ) && entry_size(name, value) <= capacity / 4
}

/// What an encoder has done so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EncoderStats {
    /// Entries inserted (duplicates included).
    pub inserts: u64,
    /// Of those, duplicates.
    pub duplicates: u64,
    /// Field lines that referenced the dynamic table.
    pub dynamic_refs: u64,
    /// Field sections with a Required Insert Count above 0.
    pub sections_with_refs: u64,
    /// Of those, sections that referenced entries not yet acknowledged (they may block).
    pub blocking_sections: u64,
    /// Encoder-stream bytes written.
    pub encoder_stream_bytes: u64,
    /// Decoder-stream bytes received.
    pub decoder_stream_bytes: u64,
}

/// A field section waiting for its acknowledgement.
#[derive(Debug, Clone, Copy)]
struct Outstanding {
    stream: u64,
    ric: u64,
    min_ref: u64,
}

/// How one field line of a section is represented.
#[derive(Debug, Clone, Copy)]
enum Rep {
    Static(u64),
    Dynamic(u64),
    StaticName(u64),
    DynamicName(u64),
    Literal,
}

/// A QPACK encoder for one connection.
#[derive(Debug)]
pub struct QpackEncoder {
    table: DynamicTable,
    own_max: u64,
    /// The peer's SETTINGS_QPACK_MAX_TABLE_CAPACITY (for the Required Insert Count).
    peer_capacity: u64,
    peer_blocked: u64,
    settings_seen: bool,
    known_received: u64,
    outstanding: VecDeque<Outstanding>,
    /// Encoder-stream bytes to send.
    out: Vec<u8>,
    /// Decoder-stream bytes not yet a whole instruction.
    pending: Partial,
    plan: Vec<Rep>,
    /// Scratch of [`QpackEncoder::blocking_count`].
    seen: Vec<u64>,
    stats: EncoderStats,
}

impl QpackEncoder {
    /// An encoder that will use at most `own_max` bytes of table (0: static only), whatever
    /// the peer allows.
    pub fn new(own_max: u64) -> QpackEncoder {
        QpackEncoder {
            table: DynamicTable::new(),
            own_max: own_max.min(MAX_TABLE_CAPACITY),
            peer_capacity: 0,
            peer_blocked: 0,
            settings_seen: false,
            known_received: 0,
            outstanding: VecDeque::new(),
            out: Vec::new(),
            pending: Partial::default(),
            plan: Vec::new(),
            seen: Vec::new(),
            stats: EncoderStats::default(),
        }
    }

    /// The peer's SETTINGS: its table capacity and blocked streams. The table is set to the
    /// smaller of its capacity and ours (announced on the encoder stream when above 0).
    /// Only the first call counts (SETTINGS come once).
    pub fn peer_settings(&mut self, max_table_capacity: u64, blocked_streams: u64) {
        if std::mem::replace(&mut self.settings_seen, true) {
            return;
        }
        self.peer_capacity = max_table_capacity;
        self.peer_blocked = blocked_streams;
        let cap = self.own_max.min(max_table_capacity);
        if cap > 0 {
            self.table.set_capacity(cap);
            self.emit(&EncoderInstruction::SetCapacity(cap));
        }
    }

    /// The capacity the encoder uses (0 before SETTINGS or when either side says 0).
    pub fn capacity(&self) -> u64 {
        self.table.capacity()
    }

    /// The peer's advertised capacity and blocked streams, once its SETTINGS arrived.
    pub fn peer(&self) -> Option<(u64, u64)> {
        self.settings_seen
            .then_some((self.peer_capacity, self.peer_blocked))
    }

    /// What the encoder has done.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }

    /// The Known Received Count.
    pub fn known_received(&self) -> u64 {
        self.known_received
    }

    /// The table.
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    /// Appends the encoder-stream bytes to send onto `out`; send them before or with the
    /// field sections that reference them.
    pub fn drain_output(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }

    /// Bytes this encoder holds beyond its fixed size.
    pub fn memory(&self) -> usize {
        self.table.content_bytes()
            + self.table.len() * std::mem::size_of::<(Box<[u8]>, usize)>()
            + self.outstanding.capacity() * std::mem::size_of::<Outstanding>()
            + self.out.capacity()
            + self.pending.capacity()
            + self.plan.capacity() * std::mem::size_of::<Rep>()
    }

    fn emit(&mut self, ins: &EncoderInstruction<'_>) {
        let before = self.out.len();
        write_encoder_instruction(&mut self.out, ins);
        self.stats.encoder_stream_bytes += (self.out.len() - before) as u64;
    }

    /// Whether stream `s` has an unacknowledged section referencing entries the peer may not
    /// have yet.
    fn stream_blocking(&self, s: u64) -> bool {
        let kr = self.known_received;
        // Every insert acknowledged (the steady state): nothing can block.
        if kr >= self.table.insert_count() {
            return false;
        }
        self.outstanding.iter().any(|o| o.stream == s && o.ric > kr)
    }

    /// How many streams are blocking (see [`QpackEncoder::stream_blocking`]), counted up to
    /// `limit` (past it the answer is the same for the caller), in a kept scratch list.
    fn blocking_count(&mut self, limit: u64) -> u64 {
        let kr = self.known_received;
        if kr >= self.table.insert_count() {
            return 0;
        }
        let seen = &mut self.seen;
        seen.clear();
        for o in self.outstanding.iter().filter(|o| o.ric > kr) {
            if !seen.contains(&o.stream) {
                seen.push(o.stream);
                if seen.len() as u64 >= limit {
                    break;
                }
            }
        }
        seen.len() as u64
    }

    /// Applies bytes of the peer's decoder stream (any split). An error is a connection
    /// error of type QPACK_DECODER_STREAM_ERROR.
    pub fn feed_decoder(&mut self, data: &[u8]) -> Result<(), QpackError> {
        self.stats.decoder_stream_bytes += data.len() as u64;
        let mut pending = std::mem::take(&mut self.pending);
        let r = pending.feed(data, |buf| {
            let mut at = 0;
            while let Some((n, ins)) = read_decoder_instruction(&buf[at..])? {
                at += n;
                self.apply(ins)?;
            }
            Ok(at)
        });
        self.pending = pending;
        r?;
        if self.pending.kept().len() > 10 {
            return Err(QpackError("decoder instruction too long"));
        }
        Ok(())
    }

    /// Applies one decoder-stream instruction.
    fn apply(&mut self, ins: DecoderInstruction) -> Result<(), QpackError> {
        match ins {
            DecoderInstruction::SectionAck(stream) => {
                let i = self
                    .outstanding
                    .iter()
                    .position(|o| o.stream == stream)
                    .ok_or(QpackError("Section Acknowledgment for no section"))?;
                let o = self.outstanding.remove(i).expect("found");
                self.known_received = self.known_received.max(o.ric);
            }
            DecoderInstruction::StreamCancel(stream) => {
                self.outstanding.retain(|o| o.stream != stream);
            }
            DecoderInstruction::InsertCountIncrement(n) => {
                let kr = self
                    .known_received
                    .checked_add(n)
                    .filter(|k| n > 0 && *k <= self.table.insert_count())
                    .ok_or(QpackError("Insert Count Increment beyond the inserts"))?;
                self.known_received = kr;
            }
        }
        Ok(())
    }

    /// Encodes `fields` (lowercase names) as the field section of stream `stream_id` onto
    /// `section`, inserting into the table (instructions for [`QpackEncoder::drain_output`]) as it
    /// goes.
    pub fn encode<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        stream_id: u64,
        fields: &[(N, V)],
        section: &mut Vec<u8>,
    ) {
        let mut plan = std::mem::take(&mut self.plan);
        plan.clear();
        let use_table = self.table.capacity() > 0 && self.outstanding.len() < MAX_OUTSTANDING;
        let may_block = use_table
            && self.peer_blocked > 0
            && (self.stream_blocking(stream_id)
                || self.blocking_count(self.peer_blocked) < self.peer_blocked);
        // The oldest entry this section references: nothing below it may be evicted.
        let mut pinned = u64::MAX;
        for (name, value) in fields {
            let (name, value) = (name.as_ref(), value.as_ref());
            let rep = if use_table {
                self.plan_field(name, value, may_block, &mut pinned)
            } else {
                static_rep(name, value)
            };
            plan.push(rep);
        }
        let mut ric = 0;
        for rep in &plan {
            if let Rep::Dynamic(a) | Rep::DynamicName(a) = rep {
                ric = ric.max(a + 1);
            }
        }
        self.write_section(stream_id, fields, &plan, ric, section);
        self.plan = plan;
    }

    /// Decides one field's representation, inserting or duplicating when that pays; a
    /// dynamic reference lowers `pinned`.
    fn plan_field(&mut self, name: &[u8], value: &[u8], may_block: bool, pinned: &mut u64) -> Rep {
        let rep = static_rep(name, value);
        if let Rep::Static(_) = rep {
            return rep;
        }
        let kr = self.known_received;
        let usable = |a: u64| a < kr || may_block;
        let (exact, by_name) = self.table.find(name, value, self.table.first());
        let mut chosen = None;
        if let Some(a) = exact.filter(|a| usable(*a)) {
            let dup = if may_block && self.draining(a) {
                self.duplicate(a, *pinned)
            } else {
                None
            };
            chosen = Some(Rep::Dynamic(dup.unwrap_or(a)));
        } else if worth_indexing(name, value, self.table.capacity()) {
            let inserted = self.insert(name, value, rep, by_name, *pinned);
            chosen = inserted.filter(|_| may_block).map(Rep::Dynamic);
        }
        let rep = chosen.unwrap_or(match (rep, by_name) {
            (Rep::StaticName(_), _) => rep,
            (_, Some(a)) if usable(a) && self.table.get(a).is_some() => Rep::DynamicName(a),
            _ => Rep::Literal,
        });
        if let Rep::Dynamic(a) | Rep::DynamicName(a) = rep {
            *pinned = (*pinned).min(a);
        }
        rep
    }

    /// Whether entry `a` is in the oldest quarter of the table (by size): soon evicted.
    fn draining(&self, a: u64) -> bool {
        let cap = self.table.capacity();
        // Only a table over three quarters full drains (the usual case asks no more).
        if self.table.size() * 4 <= cap * 3 {
            return false;
        }
        let mut older = 0;
        for abs in self.table.first()..a {
            if let Some((n, v)) = self.table.get(abs) {
                older += entry_size(n, v);
                if older >= cap / 4 {
                    return false;
                }
            }
        }
        older < cap / 4
    }

    /// The first absolute index that must survive: acknowledged-only eviction, never an entry
    /// an unacknowledged section (or this one, `pinned`) references.
    fn evictable_below(&self, pinned: u64) -> u64 {
        let refs = self.outstanding.iter().map(|o| o.min_ref).min();
        self.known_received
            .min(pinned)
            .min(refs.unwrap_or(u64::MAX))
    }

    /// Whether `need` bytes of room can be made now.
    fn room(&self, need: u64, keep: u64) -> bool {
        self.table.first_after_room(need).is_some_and(|k| k <= keep)
    }

    /// Inserts a field (name by static or dynamic reference, else literal); its absolute
    /// index, or `None` when no room can be made.
    fn insert(
        &mut self,
        name: &[u8],
        value: &[u8],
        rep: Rep,
        by_name: Option<u64>,
        pinned: u64,
    ) -> Option<u64> {
        let keep = self.evictable_below(pinned);
        let need = entry_size(name, value);
        if !self.room(need, keep) {
            return None;
        }
        let survivor = self.table.first_after_room(need)?;
        let count = self.table.insert_count();
        let ins = match (rep, by_name) {
            (Rep::StaticName(i), _) => EncoderInstruction::InsertNameRef {
                is_static: true,
                index: i,
                value,
            },
            (_, Some(a)) if a >= survivor => EncoderInstruction::InsertNameRef {
                is_static: false,
                index: count - 1 - a,
                value,
            },
            _ => EncoderInstruction::InsertLiteral { name, value },
        };
        self.emit(&ins);
        self.stats.inserts += 1;
        self.table.insert(name, value)
    }

    /// Duplicates entry `a` (still in the table) when room can be made without evicting it.
    fn duplicate(&mut self, a: u64, pinned: u64) -> Option<u64> {
        let (n, v) = self.table.get(a)?;
        let need = entry_size(n, v);
        let keep = self.evictable_below(pinned).min(a);
        if !self.room(need, keep) {
            return None;
        }
        let (n, v) = (n.to_vec(), v.to_vec());
        let rel = self.table.insert_count() - 1 - a;
        self.emit(&EncoderInstruction::Duplicate(rel));
        self.stats.inserts += 1;
        self.stats.duplicates += 1;
        self.table.insert(&n, &v)
    }

    /// Writes the section: prefix (Required Insert Count, Base = RIC) and the lines, and
    /// records it as outstanding when it references the table.
    fn write_section<N: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        stream_id: u64,
        fields: &[(N, V)],
        plan: &[Rep],
        ric: u64,
        out: &mut Vec<u8>,
    ) {
        write_int(
            out,
            0,
            8,
            encode_required_insert_count(ric, self.peer_capacity),
        );
        out.push(0); // Sign 0, Delta Base 0: Base = RIC.
        let mut min_ref = u64::MAX;
        for ((name, value), rep) in fields.iter().zip(plan) {
            let (name, value) = (name.as_ref(), value.as_ref());
            match *rep {
                Rep::Static(i) => write_int(out, 0xc0, 6, i),
                Rep::Dynamic(a) => {
                    min_ref = min_ref.min(a);
                    self.stats.dynamic_refs += 1;
                    write_int(out, 0x80, 6, ric - 1 - a);
                }
                Rep::StaticName(i) => {
                    write_int(out, 0x50, 4, i);
                    write_str(out, 0x00, 0x80, 7, value);
                }
                Rep::DynamicName(a) => {
                    min_ref = min_ref.min(a);
                    self.stats.dynamic_refs += 1;
                    write_int(out, 0x40, 4, ric - 1 - a);
                    write_str(out, 0x00, 0x80, 7, value);
                }
                Rep::Literal => {
                    write_str(out, 0x20, 0x08, 3, name);
                    write_str(out, 0x00, 0x80, 7, value);
                }
            }
        }
        if ric > 0 {
            self.stats.sections_with_refs += 1;
            if ric > self.known_received {
                self.stats.blocking_sections += 1;
            }
            self.outstanding.push_back(Outstanding {
                stream: stream_id,
                ric,
                min_ref,
            });
        }
    }
}

/// The static table's indexes by name (a name may appear at several places: `:status` is at
/// 24–28 and 63–71), built once and bucketed by the name's length: a lookup compares the
/// name with the one to six names of its length, with no hash to compute (a keyed hash cost
/// a tenth of the encoder's time).
fn static_by_name() -> &'static StaticNames {
    static BY_NAME: std::sync::OnceLock<StaticNames> = std::sync::OnceLock::new();
    BY_NAME.get_or_init(|| {
        let mut m: StaticNames = Vec::new();
        for (i, (n, _)) in STATIC_TABLE.iter().enumerate() {
            let n = n.as_bytes();
            if m.len() <= n.len() {
                m.resize_with(n.len() + 1, Vec::new);
            }
            let bucket = &mut m[n.len()];
            match bucket.iter_mut().find(|(name, _)| *name == n) {
                Some((_, at)) => at.push(i as u8),
                None => bucket.push((n, vec![i as u8])),
            }
        }
        m
    })
}

/// Static names by length: `[len]` holds each name of that length with its indexes.
type StaticNames = Vec<Vec<(&'static [u8], Vec<u8>)>>;

/// A field's static-table representation: the whole field, its name, or a literal.
fn static_rep(name: &[u8], value: &[u8]) -> Rep {
    let found = static_by_name()
        .get(name.len())
        .and_then(|bucket| bucket.iter().find(|(n, _)| *n == name));
    let Some((_, at)) = found else {
        return Rep::Literal;
    };
    for &i in at {
        if STATIC_TABLE[usize::from(i)].1.as_bytes() == value {
            return Rep::Static(u64::from(i));
        }
    }
    Rep::StaticName(u64::from(at[0]))
}
