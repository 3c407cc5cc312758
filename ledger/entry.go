package ledger

import (
	"bytes"
	"fmt"
	"time"
	"unsafe"

	"github.com/noydb-go/noydb/internal/codec"
)

// Kind says what an entry records.
type Kind uint8

// The kinds of entry. The values are part of the stored format and never change.
const (
	// RecordPut: a record was written (Collection, ID, Revision, CipherHash;
	// Series, Partition and Number when the record took a number).
	RecordPut Kind = 1
	// RecordDelete: a record was deleted (Collection, ID, Revision).
	RecordDelete Kind = 2
	// NumberAllocated: a number of a series was taken (Series, Partition,
	// Number, RequestID).
	NumberAllocated Kind = 3
	// SeriesSeeded: a series was moved forward (Series, Partition, From,
	// Number, Reason).
	SeriesSeeded Kind = 4
	// NumberVoided: a taken number was voided (Series, Partition, Number, Reason).
	NumberVoided Kind = 5
	// NumberAssigned: deferred numbering gave a provisionally stored record its
	// number (Collection, ID, Series, Partition, Number).
	NumberAssigned Kind = 6
	// AppEvent: an application's own event, recorded with vault.Vault.Record
	// (its name in Reason, its data in CipherHash; read them with
	// Entry.Event). No other field is set, and the SDK never reads it as one
	// of its own entries.
	AppEvent Kind = 7
	// SeriesDefined: a series' definition (format, period, fiscal start,
	// time zone, metadata) was stored with it (Series; the definition in
	// Reason, as readable text).
	SeriesDefined Kind = 8
	// PeriodClosed: a period of a series was closed; no number can be taken
	// into it any more (Series, Partition ending with the period's label,
	// Number: the period's last number, 0 when it had none).
	PeriodClosed Kind = 9
	// RecordPulled: a sync applied, on this device, a record revision the
	// hub accepted (Collection, ID, Revision, CipherHash; Number is the
	// position of the change in the hub's feed). A sync never pushes it back.
	RecordPulled Kind = 10
	// RecordPulledDelete: a sync applied, on this device, a deletion the hub
	// accepted (Collection, ID, Revision of the deleted record; Number is the
	// position of the deletion in the hub's feed).
	RecordPulledDelete Kind = 11
	// SyncConflict: a sync found a record changed both on this device and on
	// the hub, and the collection's policy chose one side. The entry names
	// the loser: Collection, ID, its Revision and CipherHash (empty for a
	// deletion), Reason the policy and the losing side ("hub" or "device"),
	// Number the hub feed position of the hub's side.
	SyncConflict Kind = 12
	// PersonGranted: a person was given access to the vault, or their
	// collections were changed (ID the person, Reason the role, SigningKey
	// the person's, Partition the collections, sorted and unique, when
	// limited to some (at most MaxGrantCollections; empty: every
	// collection, or a grant written before grant entries named them),
	// CipherHash the SHA-256 of the person's new keyring entry). Actor is
	// the owner who granted it. See Entry.GrantCollections.
	PersonGranted Kind = 13
	// PersonRevoked: a person's access was revoked (ID the person,
	// SigningKey the key of the grant it ends (empty in entries written
	// before revocations named it), CipherHash the SHA-256 of the revoked
	// keyring entry).
	PersonRevoked Kind = 14
	// SecretChanged: a person changed the secret that opens their keyring
	// entry (ID the person, CipherHash the SHA-256 of the new entry).
	SecretChanged Kind = 15
	// KeyringUpgraded: a person's keyring entry of layout version 1 was
	// rewritten in the current layout (ID the person, Reason the role,
	// SigningKey the person's new key, CipherHash the SHA-256 of the new
	// entry). The vault's first upgrade names, in Partition (sorted), the
	// holders of layout version 1 entries then: only they upgrade later
	// (an upgrade written before upgrades named them names none).
	KeyringUpgraded Kind = 16
	// RecoveryCodesIssued: a person was given a new set of one-time
	// recovery codes, replacing any earlier set (ID the person, Number how
	// many, CipherHash the SHA-256 of the person's new recovery entry).
	RecoveryCodesIssued Kind = 17
	// RecoveryCodeUsed: a person opened the vault with a recovery code and
	// set a new secret (ID the person, RequestID the used code's id,
	// CipherHash the SHA-256 of the person's new recovery entry).
	RecoveryCodeUsed Kind = 18
	// RecoveryCodesRevoked: a person's unused recovery codes were revoked
	// (ID the person, CipherHash the SHA-256 of the new recovery entry).
	RecoveryCodesRevoked Kind = 19
	// KeysRotated: a new generation of data keys was made and wrapped for
	// every person not revoked (Number the new generation, Reason what
	// caused it: "rotate" or "revoke <user>"). Records written afterwards
	// are sealed with it; older ones are re-sealed by RecordPut entries
	// whose Reason is "resealed".
	KeysRotated Kind = 20
	// SeriesBound: an owner bound a series to a collection (Series,
	// Collection): a person limited to some collections takes, voids,
	// seeds and closes numbers only of series bound to one of theirs.
	// Verify replays it (see sign.go).
	SeriesBound Kind = 21
	// KeysResealed: every record of the vault's store sealed by a data key
	// generation below Number was re-sealed (a rotation's re-sealing
	// finished). From its position on, a record sealed below Number on
	// that store is not one the vault wrote (see vault: the generation
	// floor). Linked with the people entries (From), so a replay of the
	// ledger's people finds it without reading the rest.
	KeysResealed Kind = 22
	// KeysRenewed: a person renewed their keys (a secret change, an open
	// with a recovery code): ID the person, who is the author (any role
	// records their own), SigningKey their new signing key, CipherHash the
	// SHA-256 of their new keyring entry. The entry ends its commit and is
	// signed by the person's signing key before it; from the next entry
	// on, only the new key signs for them. Linked with the people entries
	// (From), and replayed with them.
	KeysRenewed Kind = 23
)

var kindNames = [...]string{
	RecordPut:            "record-put",
	RecordDelete:         "record-delete",
	NumberAllocated:      "number-allocated",
	SeriesSeeded:         "series-seeded",
	NumberVoided:         "number-voided",
	NumberAssigned:       "number-assigned",
	AppEvent:             "app-event",
	SeriesDefined:        "series-defined",
	PeriodClosed:         "period-closed",
	RecordPulled:         "record-pulled",
	RecordPulledDelete:   "record-pulled-delete",
	SyncConflict:         "sync-conflict",
	PersonGranted:        "person-granted",
	PersonRevoked:        "person-revoked",
	SecretChanged:        "secret-changed",
	KeyringUpgraded:      "keyring-upgraded",
	RecoveryCodesIssued:  "recovery-codes-issued",
	RecoveryCodeUsed:     "recovery-code-used",
	RecoveryCodesRevoked: "recovery-codes-revoked",
	KeysRotated:          "keys-rotated",
	SeriesBound:          "series-bound",
	KeysResealed:         "keys-resealed",
	KeysRenewed:          "keys-renewed",
}

// Valid reports whether k is one of the defined kinds.
func (k Kind) Valid() bool { return k >= RecordPut && k <= KeysRenewed }

// String returns the kind's name, e.g. "record-put".
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry is one ledger entry. Which fields are set depends on Kind; the rest
// are zero. Seq is assigned by the ledger when the entry commits; Time is
// the writer's clock then, and Actor the vault's user (vault.Config.User)
// that made the change.
type Entry struct {
	// Seq is the entry's position: dense, from 1.
	Seq uint64
	// Time is when the entry was appended (UTC when read back; nanosecond precision).
	Time time.Time
	// Actor is who made the change.
	Actor string
	// Kind says what the entry records.
	Kind Kind

	// Collection and ID name the record of a record entry.
	Collection, ID string
	// Revision is the record's revision after the change.
	Revision uint64
	// CipherHash is the SHA-256 of the stored ciphertext of a record entry.
	CipherHash []byte

	// Series and Partition name the series of a numbering entry.
	Series    string
	Partition []string
	// Number is the number taken, voided or assigned, or the new position of a seeded series.
	Number uint64
	// From is the previous position of a seeded series; on a people entry
	// (PersonGranted, PersonRevoked, KeyringUpgraded), set by the ledger,
	// the position of the ledger's people entry before it (0: none, or an
	// entry written before people entries were linked).
	From uint64
	// RequestID is the caller's idempotency key of an allocation.
	RequestID string
	// Reason is the caller's stated reason (seeding, voiding).
	Reason string

	// SigningKey is an Ed25519 public key the entry introduces: the new
	// person's of a PersonGranted entry, the person's own of a
	// KeyringUpgraded entry, and the author's own on the first entry of a
	// ledger (its genesis); or the key whose grant a PersonRevoked entry
	// ends. Empty otherwise.
	SigningKey []byte
	// Signature is the author's Ed25519 signature of the entry and of the
	// commit it ends (see sign.go), set by the ledger on the last entry of
	// each commit by a vault whose person has a signing key; empty on the
	// commit's other entries (Covered), on entries of a person without one
	// (a keyring entry of layout version 1) and on entries written before
	// signatures existed.
	Signature []byte
	// Covered marks an entry that has no signature of its own: it is not
	// the last entry of its commit, and the signature of that last entry,
	// by the same author, covers it through the chain (the signed message
	// holds the MAC of the entry before the last, which commits every entry
	// before it). Set by the ledger; an entry with a Signature is not
	// Covered.
	Covered bool
	// Chained marks an entry written without a signature while one person
	// alone had ever held the vault's data key: the chain MAC, which only
	// that person could compute, says who wrote it (see sign.go, "One
	// person"). Set by the ledger; a Chained entry is neither Covered nor
	// signed.
	Chained bool
}

// Versions of the entry encoding: the first byte of every entry encoding.
const (
	// entryVersion encodes an entry without SigningKey and Signature.
	entryVersion = 1
	// entryVersionSigned encodes an entry with SigningKey or Signature.
	entryVersionSigned = 2
	// entryVersionCovered encodes a Covered entry: version 2 without the
	// Signature field.
	entryVersionCovered = 3
	// entryVersionChained encodes a Chained entry: version 3's fields,
	// marked as vouched for by the chain alone.
	entryVersionChained = 4
)

// Sizes of the signature fields.
const (
	signingKeySize = 32
	signatureSize  = 64
)

// Limits on the canonical encoding.
const (
	// maxField bounds every string and byte field of an entry.
	maxField = 64 << 10
	// maxPartition bounds the number of partition components.
	maxPartition = 64
	// minUnix and maxUnix bound Time to the years 1 through 9999, the zero
	// time.Time included.
	minUnix = -62135596800
	maxUnix = 253402300799
)

// MarshalBinary returns the canonical binary encoding of e (format version 1).
// Every field is included, so the encoding is what the hash chain covers:
//
//	[1] version (1)
//	uvarint Seq
//	varint  Time seconds since the Unix epoch, uvarint nanoseconds (< 1e9)
//	str     Actor
//	[1] Kind
//	str Collection, str ID, uvarint Revision, str CipherHash
//	str Series, uvarint len(Partition), str each component
//	uvarint Number, uvarint From, str RequestID, str Reason
//
// where str is a uvarint length followed by the bytes (internal/codec).
// An entry with a SigningKey or a Signature is encoded in format version 2:
// the same fields after a version byte 2, followed by
//
//	str SigningKey (empty or 32 bytes), str Signature (empty or 64 bytes)
//
// so entries without them keep their version 1 bytes. A Covered entry is
// encoded in format version 3: version 2 without the Signature field; a
// Chained entry in format version 4, with the fields of version 3.
// Varints are minimal, so every entry has exactly one encoding. It fails with
// ErrInvalidEntry for an unknown kind, a time outside the years 1 to 9999, a
// field longer than 64 KiB, more than 64 partition components, or a
// SigningKey or Signature of the wrong size.
func (e Entry) MarshalBinary() ([]byte, error) {
	return e.AppendBinary(make([]byte, 0, e.encodedLen()))
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (e Entry) AppendBinary(b []byte) ([]byte, error) {
	if err := e.check(); err != nil {
		return b, err
	}
	return e.appendTo(b), nil
}

func (e Entry) check() error {
	if !e.Kind.Valid() {
		return fmt.Errorf("%w: unknown kind %d", ErrInvalidEntry, uint8(e.Kind))
	}
	if s := e.Time.Unix(); s < minUnix || s > maxUnix {
		return fmt.Errorf("%w: time %v outside the years 1 to 9999", ErrInvalidEntry, e.Time)
	}
	if len(e.Partition) > maxPartition {
		return fmt.Errorf("%w: %d partition components (at most %d)", ErrInvalidEntry, len(e.Partition), maxPartition)
	}
	long := len(e.Actor) > maxField || len(e.Collection) > maxField || len(e.ID) > maxField ||
		len(e.CipherHash) > maxField || len(e.Series) > maxField || len(e.RequestID) > maxField ||
		len(e.Reason) > maxField
	for _, p := range e.Partition {
		long = long || len(p) > maxField
	}
	if long {
		return fmt.Errorf("%w: a field is longer than %d bytes", ErrInvalidEntry, maxField)
	}
	if n := len(e.SigningKey); n != 0 && n != signingKeySize {
		return fmt.Errorf("%w: signing key of %d bytes (want %d)", ErrInvalidEntry, n, signingKeySize)
	}
	if n := len(e.Signature); n != 0 && n != signatureSize {
		return fmt.Errorf("%w: signature of %d bytes (want %d)", ErrInvalidEntry, n, signatureSize)
	}
	if e.Covered && len(e.Signature) > 0 {
		return fmt.Errorf("%w: a covered entry with a signature of its own", ErrInvalidEntry)
	}
	if e.Chained && (e.Covered || len(e.Signature) > 0) {
		return fmt.Errorf("%w: a chained entry covered or signed", ErrInvalidEntry)
	}
	return nil
}

// unsigned reports whether e is an entry of layout version 1: no
// signature, none to come, and not vouched for by the chain alone.
func (e *Entry) unsigned() bool { return len(e.Signature) == 0 && !e.Covered && !e.Chained }

// signed reports whether e is encoded in format version 2.
func (e *Entry) signed() bool { return len(e.SigningKey) > 0 || len(e.Signature) > 0 }

// encodedLen is an upper bound of the encoding's length.
func (e Entry) encodedLen() int {
	n := 2 + 17*codec.MaxVarintLen + len(e.SigningKey) + len(e.Signature) + len(e.Actor) + len(e.Collection) +
		len(e.ID) + len(e.CipherHash) + len(e.Series) + len(e.RequestID) + len(e.Reason)
	for _, p := range e.Partition {
		n += codec.MaxVarintLen + len(p)
	}
	return n
}

func (e Entry) appendTo(b []byte) []byte {
	if e.Chained {
		return e.appendFields(b, entryVersionChained)
	}
	if e.Covered {
		return e.appendFields(b, entryVersionCovered)
	}
	if !e.signed() {
		return e.appendFields(b, entryVersion)
	}
	b = e.appendFields(b, entryVersionSigned)
	return codec.AppendBytes(b, e.Signature)
}

// appendFields appends the encoding of e up to its Signature: with
// version 2, everything but the last field.
func (e *Entry) appendFields(b []byte, version byte) []byte {
	b = append(b, version)
	b = codec.AppendUvarint(b, e.Seq)
	b = codec.AppendVarint(b, e.Time.Unix())
	b = codec.AppendUvarint(b, uint64(e.Time.Nanosecond()))
	b = codec.AppendString(b, e.Actor)
	b = append(b, byte(e.Kind))
	b = codec.AppendString(b, e.Collection)
	b = codec.AppendString(b, e.ID)
	b = codec.AppendUvarint(b, e.Revision)
	b = codec.AppendBytes(b, e.CipherHash)
	b = codec.AppendString(b, e.Series)
	b = codec.AppendUvarint(b, uint64(len(e.Partition)))
	for _, p := range e.Partition {
		b = codec.AppendString(b, p)
	}
	b = codec.AppendUvarint(b, e.Number)
	b = codec.AppendUvarint(b, e.From)
	b = codec.AppendString(b, e.RequestID)
	b = codec.AppendString(b, e.Reason)
	if version != entryVersion {
		b = codec.AppendBytes(b, e.SigningKey)
	}
	return b
}

// UnmarshalBinary decodes the canonical encoding made by MarshalBinary. It
// accepts only canonical input (minimal varints, known version and kind,
// nanoseconds below one second, no trailing bytes) and otherwise returns an
// error matching ErrMalformed, leaving e unchanged.
func (e *Entry) UnmarshalBinary(data []byte) error {
	r := newReader(data, false)
	d := r.entry()
	if err := r.End(); err != nil {
		return err
	}
	*e = d
	return nil
}

// decodeEntry decodes one entry from the front of data and returns how many
// bytes it used.
// The entry's strings share one copy of data. With skim, the entry is only
// checked: its strings, CipherHash and Partition are left empty.
func decodeEntry(data []byte, skim bool) (Entry, int, error) {
	r := newReader(data, skim)
	e := r.entry()
	if err := r.Err(); err != nil {
		return Entry{}, 0, err
	}
	return e, r.Offset(), nil
}

// reader is a codec.Reader whose fields are cut from one copy of the
// input: its strings and its byte fields alike, each a part of the copy
// no other field overlaps. Nothing writes the copy once it is made, and a
// byte field (capped, so an append to it moves it) is the only handle on
// its part: a caller that changes the bytes of one changes no string.
type reader struct {
	codec.Reader
	cp   []byte // the copy of the input, when fields are kept
	skim bool   // str returns "" (the input is only checked)
}

func newReader(data []byte, skim bool) reader {
	r := reader{Reader: codec.NewReader(data), skim: skim}
	if !skim {
		r.cp = bytes.Clone(data)
	}
	return r
}

// str reads a string field.
func (r *reader) str() string {
	b := r.Bytes(maxField)
	if len(b) == 0 || r.skim {
		return ""
	}
	return unsafe.String(&r.cp[r.Offset()-len(b)], len(b))
}

// kept returns b, the byte field just read, as the entry keeps it: its
// part of the copy, or a copy of its own when skimming.
func (r *reader) kept(b []byte) []byte {
	if r.skim {
		return bytes.Clone(b)
	}
	end := r.Offset()
	return r.cp[end-len(b) : end : end]
}

// entry reads one entry; on failure r.Err() is set and the entry is zero.
func (r *reader) entry() Entry {
	version := r.Byte()
	if r.Err() == nil && (version < entryVersion || version > entryVersionChained) {
		r.Fail("unknown version")
	}
	var e Entry
	e.Seq = r.Uvarint()
	sec := r.Varint()
	nsec := r.Uvarint()
	if r.Err() == nil && (nsec >= 1e9 || sec < minUnix || sec > maxUnix) {
		r.Fail("time out of range")
	}
	if r.Err() == nil {
		e.Time = time.Unix(sec, int64(nsec)).UTC()
	}
	e.Actor = r.str()
	e.Kind = Kind(r.Byte())
	if r.Err() == nil && !e.Kind.Valid() {
		r.Fail("unknown kind")
	}
	e.Collection = r.str()
	e.ID = r.str()
	e.Revision = r.Uvarint()
	if h := r.Bytes(maxField); len(h) > 0 && !r.skim {
		e.CipherHash = r.kept(h)
	}
	e.Series = r.str()
	if n := r.Count(maxPartition, 1); n > 0 {
		if r.skim {
			for range n {
				r.str()
			}
		} else {
			e.Partition = make([]string, n)
			for i := range e.Partition {
				e.Partition[i] = r.str()
			}
		}
	}
	e.Number = r.Uvarint()
	e.From = r.Uvarint()
	e.RequestID = r.str()
	e.Reason = r.str()
	if version != entryVersion {
		// Kept even when skimming: verification needs them.
		if k := r.Bytes(signingKeySize); len(k) > 0 {
			if len(k) != signingKeySize {
				r.Fail("bad signing key size")
			}
			e.SigningKey = r.kept(k)
		}
		e.Covered = version == entryVersionCovered
		e.Chained = version == entryVersionChained
	}
	if version == entryVersionSigned {
		if s := r.Bytes(signatureSize); len(s) > 0 {
			if len(s) != signatureSize {
				r.Fail("bad signature size")
			}
			e.Signature = r.kept(s)
		}
		if r.Err() == nil && !e.signed() {
			r.Fail("version 2 without signing key or signature")
		}
	}
	if r.Err() != nil {
		return Entry{}
	}
	return e
}
