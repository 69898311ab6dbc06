//! What decoding a request will cost, read from its bytes before prost decodes it.
//!
//! An empty repeated message costs two bytes on the wire and the whole size of its struct (and
//! more, as vectors grow by doubling) once decoded, so a request's byte count says little about
//! the memory decoding it takes. [`scan`] walks the protobuf wire format with the API's schema
//! (written by `build.rs` from `proto/`) and returns an upper bound of what prost will allocate
//! for it, without allocating anything itself, in one pass over the bytes. The codec
//! (`grpc::codec`) charges that bound to the replica's request budget before decoding.
//!
//! The bound counts every struct (a repeated element at up to twice its size, as a vector doubles,
//! and four times for a vector's first element, its minimum capacity), every string and bytes
//! field (its length plus allocator rounding) and every map entry (a B-tree node per entry for the
//! first of a map, then its share of a node at least half full).

/// What one field of a message holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// `string` or `bytes`.
    Bytes,
    /// A message, by its index in [`MESSAGES`].
    Message(usize),
    /// A varint scalar decoded into this many bytes (bool, enums, 32- and 64-bit integers).
    Varint(usize),
    /// A 4-byte fixed-width scalar (the API has none today; `build.rs` maps them).
    #[allow(dead_code)]
    Fixed32,
    /// An 8-byte fixed-width scalar (likewise).
    #[allow(dead_code)]
    Fixed64,
    /// A map: each entry is a message with the key as field 1 and the value as field 2; `entry`
    /// is the bytes of one key and value inside a map node.
    Map {
        /// The key's kind.
        key: &'static Kind,
        /// The value's kind.
        value: &'static Kind,
        /// Bytes of a key and a value in a node.
        entry: usize,
    },
}

/// One field of a message.
#[derive(Debug)]
pub(crate) struct FieldSchema {
    /// The field number.
    pub number: u32,
    /// The field's name in `proto/`.
    pub name: &'static str,
    /// Whether the field is repeated (maps are).
    pub repeated: bool,
    /// What it holds.
    pub kind: Kind,
}

/// One message of the API.
#[derive(Debug)]
pub(crate) struct MessageSchema {
    /// `size_of` the generated struct.
    pub size: usize,
    /// Its fields, by increasing number.
    pub fields: &'static [FieldSchema],
}

/// A generated message type's place in the wire schema.
pub trait WireSchema {
    /// Index of the message in the schema.
    const INDEX: usize;
    /// The message's full name, e.g. `placement.v1.Pod`.
    const NAME: &'static str;
}

include!(concat!(env!("OUT_DIR"), "/wire_schema.rs"));

/// Heap bytes a string of `len` bytes takes at most: prost reserves exactly `len` (at least 8),
/// and the allocator rounds up.
fn string_bytes(len: usize) -> usize {
    len.max(8) + 16
}

/// Minimum capacity of a vector's first allocation (`RawVec`'s rule).
fn first_capacity(size: usize) -> usize {
    if size <= 1024 {
        4
    } else {
        1
    }
}

/// Slots in a B-tree node (`BTreeMap`'s `CAPACITY`).
const BTREE_NODE_SLOTS: usize = 11;

/// What serving a part of a request costs beyond decoding it: a share of its decoded bytes (in
/// percent, the decoded bytes included) and a number of bytes per message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Weight {
    /// Bytes of work per 100 decoded bytes.
    pub percent: usize,
    /// Bytes of work per message.
    pub per_message: usize,
}

impl Weight {
    /// Work for `decoded` bytes.
    fn of(self, decoded: usize) -> usize {
        decoded.saturating_mul(self.percent) / 100
    }
}

/// What [`scan`] knows of the messages in one field: their weight, and the most bytes one may
/// take on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Their weight.
    pub weight: Weight,
    /// Largest encoding of one of them, in bytes.
    pub max_bytes: usize,
}

/// Weights of the parts of a request: the root's, and those of the messages entered through
/// given fields (a message without one takes its parent's).
#[derive(Debug, Clone)]
pub struct Weights {
    /// The root message's weight.
    pub root: Weight,
    /// `(message index, field number)` to what is known of the messages in that field.
    pub fields: Vec<((usize, u32), Part)>,
}

impl Weights {
    /// Every byte counted once: the decoded size alone.
    pub fn decoded_only() -> Self {
        Self {
            root: Weight {
                percent: 100,
                per_message: 0,
            },
            fields: Vec::new(),
        }
    }

    /// What is known of the messages in field `number` of the message `index`.
    fn field(&self, index: usize, number: u32) -> Option<Part> {
        self.fields
            .iter()
            .find(|((m, n), _)| *m == index && *n == number)
            .map(|(_, p)| *p)
    }
}

/// What a request will cost once decoded, and what it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WireCost {
    /// Upper bound of the bytes prost allocates to decode the message.
    pub decoded_bytes: usize,
    /// The work of serving it, by the [`Weights`] given to [`scan`].
    pub work_bytes: usize,
    /// Messages in it, the root included.
    pub messages: usize,
    /// Messages of each type, by index in the schema (see [`WireCost::count_of`]).
    pub by_type: Vec<usize>,
    /// Elements of each repeated field of the root message: `(field number, count)`.
    pub root_counts: Vec<(u32, usize)>,
}

impl WireCost {
    /// Messages of type `T` in the request.
    pub fn count_of<T: WireSchema>(&self) -> usize {
        self.by_type.get(T::INDEX).copied().unwrap_or(0)
    }

    /// Elements of the root message's repeated field `number`.
    pub fn root_count(&self, number: u32) -> usize {
        self.root_counts
            .iter()
            .find(|(n, _)| *n == number)
            .map_or(0, |(_, c)| *c)
    }

    /// Counts `decoded` bytes of a part of weight `w`.
    fn bytes(&mut self, decoded: usize, w: Weight) {
        self.decoded_bytes = self.decoded_bytes.saturating_add(decoded);
        self.work_bytes = self.work_bytes.saturating_add(w.of(decoded));
    }

    /// Adds the messages and bytes of `inner`.
    fn add(&mut self, inner: &WireCost) {
        self.decoded_bytes = self.decoded_bytes.saturating_add(inner.decoded_bytes);
        self.work_bytes = self.work_bytes.saturating_add(inner.work_bytes);
        self.messages += inner.messages;
        for (total, n) in self.by_type.iter_mut().zip(&inner.by_type) {
            *total += n;
        }
    }
}

/// Why [`scan`] refuses the bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// They are not a message of the schema (prost would refuse them too).
    #[error("failed to decode Protobuf message: {reason} at byte {offset}")]
    Malformed {
        /// What is wrong.
        reason: &'static str,
        /// Where.
        offset: usize,
    },
    /// The request weighs more than [`ScanLimits::max_work`] (the scan stopped there).
    #[error("serving it would take more than {max} bytes")]
    OverWork {
        /// The limit.
        max: usize,
    },
    /// A repeated field of the root message has more elements than [`ScanLimits::root_max`].
    #[error("{field}: {count} elements or more, more than the {max} allowed")]
    TooMany {
        /// The field's name.
        field: &'static str,
        /// Its elements, counted up to [`COUNT_PAST_LIMIT`] times the limit.
        count: usize,
        /// Whether `count` is all of them.
        exact: bool,
        /// The most allowed.
        max: usize,
    },
    /// One message is larger than its field allows ([`Part::max_bytes`]).
    #[error("{path}: {len} bytes, more than the {max} bytes one object may take")]
    TooLarge {
        /// The message's path, e.g. `pods[3]`.
        path: String,
        /// Its encoded size.
        len: usize,
        /// The most allowed.
        max: usize,
    },
}

fn malformed(reason: &'static str, offset: usize) -> WireError {
    WireError::Malformed { reason, offset }
}

/// Fields a message may have for [`scan`] to count its repeated elements per field.
const MAX_FIELDS: usize = 40;

/// One message being read.
struct Frame {
    /// Its index in [`MESSAGES`].
    index: usize,
    /// The field it is in, and its position there (0 for a singular field).
    entered: Option<(&'static FieldSchema, u32)>,
    /// The offset where its bytes end.
    end: usize,
    /// Its weight.
    weight: Weight,
    /// Elements seen of each field (by position in its fields).
    counts: [u32; MAX_FIELDS],
}

impl Frame {
    fn new(index: usize, end: usize, weight: Weight) -> Self {
        Self {
            index,
            entered: None,
            end,
            weight,
            counts: [0; MAX_FIELDS],
        }
    }

    /// Elements of the field at `position` seen so far.
    fn seen(&self, position: usize) -> u32 {
        self.counts.get(position).copied().unwrap_or(0)
    }

    /// Counts one more element of the field at `position`; true for the first.
    fn first(&mut self, position: usize) -> bool {
        match self.counts.get_mut(position) {
            Some(c) => {
                *c = c.saturating_add(1);
                *c == 1
            }
            None => true,
        }
    }
}

fn varint(data: &[u8], pos: &mut usize, end: usize) -> Result<u64, WireError> {
    let start = *pos;
    let mut value = 0u64;
    for shift in 0..10 {
        let Some(&b) = data.get(*pos).filter(|_| *pos < end) else {
            return Err(malformed("truncated varint", start));
        };
        *pos += 1;
        value |= u64::from(b & 0x7f) << (7 * shift);
        if b < 0x80 {
            return Ok(value);
        }
    }
    Err(malformed("invalid varint", start))
}

/// Reads a length prefix and checks the bytes it announces are there.
fn length(data: &[u8], pos: &mut usize, end: usize) -> Result<usize, WireError> {
    let at = *pos;
    let len = varint(data, pos, end)?;
    match usize::try_from(len).ok().filter(|l| *l <= end - *pos) {
        Some(l) => Ok(l),
        None => Err(malformed("buffer underflow", at)),
    }
}

/// Skips a field of a type the schema does not know (prost skips unknown fields too), groups
/// included, to their matching end.
fn skip(data: &[u8], pos: &mut usize, end: usize, wire_type: u64, number: u64) -> Result<(), WireError> {
    let mut groups: Vec<u64> = Vec::new();
    let (mut wire_type, mut number) = (wire_type, number);
    loop {
        match wire_type {
            0 => {
                varint(data, pos, end)?;
            }
            1 | 5 => {
                let n = if wire_type == 1 { 8 } else { 4 };
                if end - *pos < n {
                    return Err(malformed("buffer underflow", *pos));
                }
                *pos += n;
            }
            2 => {
                let len = length(data, pos, end)?;
                *pos += len;
            }
            3 => {
                // prost's recursion limit.
                if groups.len() >= 100 {
                    return Err(malformed("recursion limit reached", *pos));
                }
                groups.push(number);
            }
            4 => match groups.pop() {
                Some(open) if open == number => {}
                _ => return Err(malformed("unexpected end group tag", *pos)),
            },
            _ => return Err(malformed("invalid wire type", *pos)),
        }
        if groups.is_empty() {
            return Ok(());
        }
        let key = varint(data, pos, end)?;
        wire_type = key & 7;
        number = key >> 3;
    }
}

/// Elements in a packed run of varints: one per byte without the continuation bit.
fn packed_varints(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b < 0x80).count()
}

/// Counts the map entry `data[pos..end]` of kinds `key`/`value` into `cost` at weight `w`.
fn map_entry(
    data: &[u8],
    mut pos: usize,
    end: usize,
    (key, value): (&Kind, &Kind),
    w: Weight,
    weights: &Weights,
    cost: &mut WireCost,
) -> Result<(), WireError> {
    while pos < end {
        let at = pos;
        let tag = varint(data, &mut pos, end)?;
        let (number, wire_type) = (tag >> 3, tag & 7);
        let kind = match number {
            1 => key,
            2 => value,
            0 => return Err(malformed("invalid tag value: 0", at)),
            _ => {
                skip(data, &mut pos, end, wire_type, number)?;
                continue;
            }
        };
        match (kind, wire_type) {
            (Kind::Bytes, 2) => {
                let len = length(data, &mut pos, end)?;
                cost.bytes(string_bytes(len), w);
                pos += len;
            }
            (Kind::Message(m), 2) => {
                let len = length(data, &mut pos, end)?;
                let inner = scan_from(*m, data, pos, pos + len, w, weights, &ScanLimits::default())?;
                cost.add(&inner);
                pos += len;
            }
            (Kind::Varint(_), 0) => {
                varint(data, &mut pos, end)?;
            }
            (Kind::Fixed32, 5) | (Kind::Fixed64, 1) => skip(data, &mut pos, end, wire_type, number)?,
            _ => return Err(malformed("invalid wire type", at)),
        }
    }
    Ok(())
}

/// Appends a field and its position to a path, as errors name fields: `full.pods[3]`.
fn push_path(path: &mut String, (field, index): (&FieldSchema, u32)) {
    use std::fmt::Write;
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(field.name);
    if field.repeated {
        let _ = write!(path, "[{index}]");
    }
}

/// Past a root limit, elements are counted up to this many times the limit (for the error), then
/// the scan stops.
pub const COUNT_PAST_LIMIT: usize = 16;

/// Where [`scan_limited`] stops early.
#[derive(Debug, Clone, Default)]
pub struct ScanLimits {
    /// The most work the request may weigh: the scan stops once past it.
    pub max_work: Option<usize>,
    /// `(field number, most elements)` of repeated fields of the root message: past it the scan
    /// only counts that field's elements, skipping their contents.
    pub root_max: Vec<(u32, usize)>,
}

/// Bounds what decoding `data` as the message `T` allocates, and weighs the work of serving it
/// with `weights`; errors where prost would.
pub fn scan<T: WireSchema>(data: &[u8], weights: &Weights) -> Result<WireCost, WireError> {
    scan_limited::<T>(data, weights, &ScanLimits::default())
}

/// [`scan`], stopping as soon as the request is known to break `limits` (so refusing a request
/// takes time in proportion to the limit, not to the request).
pub fn scan_limited<T: WireSchema>(data: &[u8], weights: &Weights, limits: &ScanLimits) -> Result<WireCost, WireError> {
    scan_from(T::INDEX, data, 0, data.len(), weights.root, weights, limits)
}

/// [`scan`] of the message `index` in `data[start..end]`, of weight `w`.
fn scan_from(
    index: usize,
    data: &[u8],
    start: usize,
    end: usize,
    w: Weight,
    weights: &Weights,
    limits: &ScanLimits,
) -> Result<WireCost, WireError> {
    let max_work = limits.max_work.unwrap_or(usize::MAX);
    // Past a root limit: the field whose elements are only counted from then on.
    let mut over: Option<(&'static FieldSchema, usize)> = None;
    let root = &MESSAGES[index];
    let mut cost = WireCost {
        messages: 1,
        by_type: vec![0; MESSAGES.len()],
        ..WireCost::default()
    };
    // The message itself, inline where its caller keeps it.
    cost.bytes(root.size, w);
    cost.work_bytes = cost.work_bytes.saturating_add(w.per_message);
    cost.by_type[index] = 1;
    let mut stack = vec![Frame::new(index, end, w)];
    let mut pos = start;
    loop {
        let depth = stack.len();
        let Some(frame) = stack.last_mut() else {
            break;
        };
        if cost.work_bytes > max_work {
            return Err(WireError::OverWork { max: max_work });
        }
        if pos >= frame.end {
            let done = stack.pop().expect("a frame is on the stack");
            if let (true, Some((field, max))) = (stack.is_empty(), over) {
                let position = MESSAGES[done.index]
                    .fields
                    .iter()
                    .position(|f| std::ptr::eq(f, field))
                    .unwrap_or(0);
                return Err(WireError::TooMany {
                    field: field.name,
                    count: done.seen(position) as usize,
                    exact: true,
                    max,
                });
            }
            if stack.is_empty() {
                cost.root_counts = MESSAGES[done.index]
                    .fields
                    .iter()
                    .zip(done.counts)
                    .filter(|(f, c)| f.repeated && *c > 0)
                    .map(|(f, c)| (f.number, c as usize))
                    .collect();
            }
            continue;
        }
        let at = pos;
        let (end, w) = (frame.end, frame.weight);
        let msg = &MESSAGES[frame.index];
        let tag = varint(data, &mut pos, end)?;
        let (number, wire_type) = (tag >> 3, tag & 7);
        if number == 0 {
            return Err(malformed("invalid tag value: 0", at));
        }
        let Some(position) = msg.fields.iter().position(|f| u64::from(f.number) == number) else {
            skip(data, &mut pos, end, wire_type, number)?;
            continue;
        };
        let field = &msg.fields[position];
        let first = frame.first(position);
        if depth == 1 {
            if let Some(&(_, max)) = limits.root_max.iter().find(|(n, _)| *n == field.number) {
                if frame.seen(position) as usize > max && over.is_none() {
                    over = Some((field, max));
                }
            }
            if let Some((counted, max)) = over {
                // Only counting now: skip the field whole, and stop once far past the limit.
                let seen = frame.seen(position) as usize;
                if std::ptr::eq(counted, field) && seen > max.saturating_mul(COUNT_PAST_LIMIT) {
                    return Err(WireError::TooMany {
                        field: counted.name,
                        count: seen,
                        exact: false,
                        max,
                    });
                }
                skip(data, &mut pos, end, wire_type, number)?;
                continue;
            }
        }
        // A repeated element's slot in its vector: the vector's first capacity, then doubling.
        let slot = |size: usize| {
            if !field.repeated {
                0
            } else if first {
                first_capacity(size) * size
            } else {
                2 * size
            }
        };
        match (field.kind, wire_type) {
            (Kind::Bytes, 2) => {
                let len = length(data, &mut pos, end)?;
                cost.bytes(slot(std::mem::size_of::<String>()) + string_bytes(len), w);
                pos += len;
            }
            (Kind::Message(m), 2) => {
                let len = length(data, &mut pos, end)?;
                let entered = (field, frame.seen(position).saturating_sub(1));
                let part = weights.field(frame.index, field.number);
                if let Some(part) = part.filter(|p| len > p.max_bytes) {
                    let mut path = String::new();
                    for f in stack.iter().filter_map(|f| f.entered).chain([entered]) {
                        push_path(&mut path, f);
                    }
                    return Err(WireError::TooLarge {
                        path,
                        len,
                        max: part.max_bytes,
                    });
                }
                let child = part.map_or(w, |p| p.weight);
                cost.bytes(slot(MESSAGES[m].size), child);
                cost.work_bytes = cost.work_bytes.saturating_add(child.per_message);
                cost.messages += 1;
                cost.by_type[m] += 1;
                let mut next = Frame::new(m, pos + len, child);
                next.entered = Some(entered);
                stack.push(next);
            }
            (Kind::Map { key, value, entry }, 2) => {
                let len = length(data, &mut pos, end)?;
                // The first entry of a map allocates a whole node; later ones take their share of
                // nodes at least half full, plus the edges of the internal nodes above them.
                let node = BTREE_NODE_SLOTS * entry + 16;
                cost.bytes(if first { node } else { 2 * node / BTREE_NODE_SLOTS + 16 }, w);
                map_entry(data, pos, pos + len, (key, value), w, weights, &mut cost)?;
                pos += len;
            }
            (Kind::Varint(size), 0) => {
                varint(data, &mut pos, end)?;
                cost.bytes(slot(size), w);
            }
            (Kind::Fixed32, 5) | (Kind::Fixed64, 1) => {
                let size = if wire_type == 5 { 4 } else { 8 };
                skip(data, &mut pos, end, wire_type, number)?;
                cost.bytes(slot(size), w);
            }
            (Kind::Varint(size), 2) if field.repeated => {
                let len = length(data, &mut pos, end)?;
                let n = packed_varints(&data[pos..pos + len]);
                cost.bytes(2 * size * n + first_capacity(size) * size, w);
                pos += len;
            }
            (Kind::Fixed32 | Kind::Fixed64, 2) if field.repeated => {
                let len = length(data, &mut pos, end)?;
                let size = if matches!(field.kind, Kind::Fixed32) { 4 } else { 8 };
                cost.bytes(2 * len + first_capacity(size) * size, w);
                pos += len;
            }
            _ => return Err(malformed("invalid wire type", at)),
        }
    }
    Ok(cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;
    use prost::Message;

    #[test]
    fn every_message_has_at_most_max_fields() {
        for (i, m) in MESSAGES.iter().enumerate() {
            assert!(
                m.fields.len() <= MAX_FIELDS,
                "message {i} has {} fields",
                m.fields.len()
            );
        }
    }

    #[test]
    fn empty_pods_cost_their_structs_not_their_bytes() {
        let req = proto::ScheduleRequest {
            pods: vec![proto::Pod::default(); 1000],
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        assert_eq!(bytes.len(), 2000, "two bytes per empty pod");
        let cost = scan::<proto::ScheduleRequest>(&bytes, &Weights::decoded_only()).expect("valid");
        let pod = std::mem::size_of::<proto::Pod>();
        assert!(cost.decoded_bytes >= 1000 * pod, "{cost:?} vs {pod} per pod");
        assert!(cost.decoded_bytes <= 2 * 1000 * pod + 4 * pod + 1024, "{cost:?}");
        assert_eq!(cost.root_count(2), 1000);
        assert_eq!(cost.messages, 1001);
    }

    #[test]
    fn limits_stop_the_scan_early_and_count_exactly() {
        let req = proto::ScheduleRequest {
            pods: vec![proto::Pod::default(); 1000],
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        let weights = Weights::decoded_only();
        let over = scan_limited::<proto::ScheduleRequest>(
            &bytes,
            &weights,
            &ScanLimits {
                max_work: None,
                root_max: vec![(2, 10)],
            },
        );
        assert_eq!(
            over,
            Err(WireError::TooMany {
                field: "pods",
                count: 161,
                exact: false,
                max: 10
            })
        );
        let over = scan_limited::<proto::ScheduleRequest>(
            &bytes,
            &weights,
            &ScanLimits {
                max_work: None,
                root_max: vec![(2, 100)],
            },
        );
        assert_eq!(
            over,
            Err(WireError::TooMany {
                field: "pods",
                count: 1000,
                exact: true,
                max: 100
            })
        );
        let over = scan_limited::<proto::ScheduleRequest>(
            &bytes,
            &weights,
            &ScanLimits {
                max_work: Some(10 * std::mem::size_of::<proto::Pod>()),
                root_max: Vec::new(),
            },
        );
        assert!(matches!(over, Err(WireError::OverWork { .. })), "{over:?}");
        let fits = scan_limited::<proto::ScheduleRequest>(
            &bytes,
            &weights,
            &ScanLimits {
                max_work: Some(usize::MAX),
                root_max: vec![(2, 1000)],
            },
        );
        assert_eq!(fits.map(|c| c.root_count(2)), Ok(1000));
    }

    #[test]
    fn truncated_and_wrong_wire_types_are_refused_like_prost() {
        let req = proto::ScheduleRequest {
            pods: vec![proto::Pod {
                uid: "a".repeat(100),
                ..Default::default()
            }],
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        for cut in 1..bytes.len() {
            let ours = scan::<proto::ScheduleRequest>(&bytes[..cut], &Weights::decoded_only());
            let prost = proto::ScheduleRequest::decode(&bytes[..cut]);
            assert_eq!(ours.is_err(), prost.is_err(), "cut at {cut}: {ours:?} vs {prost:?}");
        }
        // Field 2 (pods) as a varint.
        assert!(scan::<proto::ScheduleRequest>(&[0x10, 0x01], &Weights::decoded_only()).is_err());
        assert!(proto::ScheduleRequest::decode(&[0x10u8, 0x01][..]).is_err());
        // Unknown fields (1000, and the group 1001 holding a varint), groups included, are skipped.
        let unknown = [0xc0, 0x3e, 0x01, 0xcb, 0x3e, 0x08, 0x01, 0xcc, 0x3e];
        assert!(scan::<proto::ScheduleRequest>(&unknown, &Weights::decoded_only()).is_ok());
        assert!(proto::ScheduleRequest::decode(&unknown[..]).is_ok());
    }
}
