package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// entryKeys unwraps, by hand from the raw keyring entry of user (layout
// version 2, as vault/keyring.go documents it), every key the entry holds
// for a person who opens with secret: the data keys of its generations
// and the collection keys. What a person who kept their entry and secret
// can compute without the vault.
func entryKeys(t testing.TB, st stores.Store, user, secret string) []*crypto.Key {
	t.Helper()
	ctx := context.Background()
	hdr, err := st.Get(ctx, "v/team/_header")
	require.NoError(t, err)
	it, err := st.Get(ctx, "v/team/_keyring/"+user)
	require.NoError(t, err)
	entry := it.Value
	require.True(t, strings.HasPrefix(string(entry), "NOYK"))
	r := codec.NewReader(entry[4:])
	r.Version(2)
	require.Equal(t, user, r.String(1<<10))
	r.Uvarint()  // serial
	r.Byte()     // role
	r.Bool()     // revoked
	r.String(64) // granted by
	r.Varint()   // granted at
	for range r.Count(1<<12, 1) {
		r.String(1 << 10)
	}
	r.Bytes(64) // box public key
	r.Bytes(64) // signing public key
	require.Equal(t, byte(1), r.Byte(), "a secret lock")
	salt := r.Bytes(64)
	kdf := crypto.KDFParams{Time: uint32(r.Uvarint()), MemoryKiB: uint32(r.Uvarint()), Threads: uint8(r.Uvarint())}
	boxPriv := r.Bytes(256)
	type wrapped struct {
		purpose string
		key     []byte
	}
	var all []wrapped
	for range r.Count(1<<12, 2) {
		all = append(all, wrapped{purpose: "gen/" + strconv.FormatUint(r.Uvarint(), 10), key: r.Bytes(256)})
	}
	for range r.Count(1<<12, 3) {
		name := r.String(1 << 10)
		gen := r.Uvarint()
		all = append(all, wrapped{purpose: "col/" + strconv.FormatUint(gen, 10) + "/" + name, key: r.Bytes(256)})
	}
	require.NoError(t, r.Err())
	ad := func(purpose string) []byte {
		return crypto.KeyAD("team", "_keyring/"+user+"\x00"+string(hdr.Value)+"\x00"+purpose)
	}
	kek, err := crypto.DeriveUserKey([]byte(secret), salt, kdf)
	require.NoError(t, err)
	box, err := crypto.UnwrapKey(kek, boxPriv, ad("box"))
	require.NoError(t, err)
	id := crypto.IdentityFromKey(box)
	var out []*crypto.Key
	for _, w := range all {
		k, err := crypto.UnwrapKeyWith(id, w.key, ad(w.purpose))
		require.NoError(t, err, w.purpose)
		out = append(out, k)
	}
	return out
}

// rawOpens counts the records of coll on st that open with one of keys,
// used as it is or as the data key a collection's key is derived from,
// and returns it with the number of records.
func rawOpens(t testing.TB, st stores.Store, coll string, keys []*crypto.Key) (opened, total int) {
	t.Helper()
	prefix := "v/team/" + coll + "/"
	for it, err := range stores.ListUnder(context.Background(), st, prefix) {
		require.NoError(t, err)
		total++
		id := strings.TrimPrefix(it.Key, prefix)
		for _, k := range keys {
			ok := false
			for _, k := range []*crypto.Key{k, crypto.CollectionKey(k, coll)} {
				if _, _, err := crypto.OpenRecord(k, it.Value, crypto.RecordRef{Vault: "team", Collection: coll, ID: id}); err == nil {
					ok = true
				}
			}
			if ok {
				opened++
				break
			}
		}
	}
	return opened, total
}

// TestCollectionsLimitedPerson: bob, a writer limited to "notes", reads
// and writes notes and takes numbers; every call on "payroll" fails with
// ErrNotPermitted and leaves the store as it was; with the raw store and
// every key unwrapped by hand from his keyring entry he opens every note
// and none of the payroll records, written before his grant, after it,
// and after a later rotation. Carl, a writer without limit, and the owner
// read everything.
func TestCollectionsLimitedPerson(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "carl", vault.Secret([]byte("c")), vault.RoleWriter))
			notes := vault.CollectionOf[Note](owner, "notes")
			payroll := vault.CollectionOf[Note](owner, "payroll")
			for i := range 10 {
				require.NoError(t, notes.Put(ctx, fmt.Sprintf("n-%02d", i), Note{Text: "note " + strconv.Itoa(i)}))
				require.NoError(t, payroll.Put(ctx, fmt.Sprintf("p-%02d", i), Note{Text: "salary " + strconv.Itoa(i)}))
			}
			// Control: the first generation's key, which bob will hold,
			// opens the records as they are now.
			olgaKeys := entryKeys(t, st, "olga", "o")
			opened, total := rawOpens(t, st, "payroll", olgaKeys[:1])
			require.Equal(t, 10, total)
			require.Equal(t, 10, opened)

			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "notes"))
			_, pending, err := owner.PendingRotation(ctx)
			require.NoError(t, err)
			assert.False(t, pending, "the grant returns once every record is re-sealed")
			for _, coll := range []string{"notes", "payroll"} {
				for it, err := range stores.ListUnder(ctx, st, "v/team/"+coll+"/") {
					require.NoError(t, err)
					gen, perCol, err := crypto.RecordKeyOf(it.Value)
					require.NoError(t, err)
					assert.Equal(t, uint64(2), gen, it.Key)
					assert.True(t, perCol, it.Key)
				}
			}
			people, err := owner.People(ctx)
			require.NoError(t, err)
			for _, p := range people {
				if p.Name == "bob" {
					assert.Equal(t, []string{"notes"}, p.Collections)
				} else {
					assert.Empty(t, p.Collections, p.Name)
				}
			}

			bob := openPerson(t, personCfg(st, "bob", "b"))
			assert.Equal(t, vault.RoleWriter, bob.Role())
			bnotes := vault.CollectionOf[Note](bob, "notes")
			got, err := bnotes.Get(ctx, "n-03")
			require.NoError(t, err)
			assert.Equal(t, "note 3", got.Text)
			require.NoError(t, bnotes.Put(ctx, "by-bob", Note{Text: "b"}))
			n := 0
			for _, err := range bnotes.List(ctx) {
				require.NoError(t, err)
				n++
			}
			assert.Equal(t, 11, n)
			// Limited to notes, bob numbers a series an owner bound there.
			require.NoError(t, owner.BindSeries(ctx, "notes", "memos"))
			seq, err := bob.Sequence("memos", sequence.Options{})
			require.NoError(t, err)
			for i := range 3 {
				rec, err := bnotes.PutNumbered(ctx, fmt.Sprintf("memo-%d", i), seq, func(s sequence.Serial) (Note, error) {
					return Note{Text: "memo " + strconv.FormatUint(s.N, 10)}, nil
				})
				require.NoError(t, err)
				assert.Equal(t, "memo "+strconv.Itoa(i+1), rec.Text)
			}

			// Through the API: refused, nothing written.
			before := snapshot(t, st)
			bpay := vault.CollectionOf[Note](bob, "payroll")
			_, err = bpay.Get(ctx, "p-01")
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			assert.ErrorIs(t, bpay.Put(ctx, "p-01", Note{Text: "raise"}), vault.ErrNotPermitted)
			assert.ErrorIs(t, bpay.Put(ctx, "new", Note{Text: "x"}), vault.ErrNotPermitted)
			assert.ErrorIs(t, bpay.Delete(ctx, "p-02"), vault.ErrNotPermitted)
			_, err = bpay.Count(ctx)
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			for _, err := range bpay.List(ctx) {
				assert.ErrorIs(t, err, vault.ErrNotPermitted)
			}
			_, err = bpay.PutNumbered(ctx, "p-09", seq, func(sequence.Serial) (Note, error) { return Note{}, nil })
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			_, err = bpay.GetMany(ctx, []string{"p-01"})
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			assert.ErrorIs(t, bpay.PutMany(ctx, map[string]Note{"p-01": {}}), vault.ErrNotPermitted)
			assert.ErrorIs(t, bpay.DeleteMany(ctx, []string{"p-01"}), vault.ErrNotPermitted)
			_, err = bpay.GetRecord(ctx, "p-01")
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			assert.ErrorIs(t, bpay.PutIf(ctx, "p-01", Note{}, 1), vault.ErrNotPermitted)
			_, err = bpay.Update(ctx, "p-01", func(*Note) error { return nil })
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			assert.ErrorIs(t, bob.Update(ctx, func(tx *vault.Tx) error {
				return bpay.In(tx).Put("p-01", Note{Text: "raise"})
			}), vault.ErrNotPermitted)
			_, err = vault.NumberingOf(bpay, "pay", sequence.Options{}, func(*Note, sequence.Serial) {})
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			_, err = bob.ResumeRotation(ctx)
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			assert.Equal(t, before, snapshot(t, st), "nothing written")

			// With the raw store and every key bob's entry holds.
			bobKeys := entryKeys(t, st, "bob", "b")
			require.Len(t, bobKeys, 2, "generation 1's data key and the notes key of generation 2")
			opened, total = rawOpens(t, st, "payroll", bobKeys)
			assert.Equal(t, 10, total)
			assert.Zero(t, opened, "payroll records open with bob's keys")
			opened, total = rawOpens(t, st, "notes", bobKeys)
			assert.Equal(t, 14, total)
			assert.Equal(t, 14, opened, "control: bob's keys open every note")

			// A later rotation: bob gets the notes key of generation 3 only.
			rot, err := owner.RotateKeys(ctx)
			require.NoError(t, err)
			for i := 10; i < 15; i++ {
				require.NoError(t, payroll.Put(ctx, fmt.Sprintf("p-%02d", i), Note{Text: "salary " + strconv.Itoa(i)}))
				require.NoError(t, notes.Put(ctx, fmt.Sprintf("n-%02d", i), Note{Text: "note " + strconv.Itoa(i)}))
			}
			require.NoError(t, rot.Wait(ctx))
			require.NoError(t, bnotes.Put(ctx, "by-bob-3", Note{Text: "b3"}))
			bobKeys = entryKeys(t, st, "bob", "b")
			require.Len(t, bobKeys, 3)
			opened, total = rawOpens(t, st, "payroll", bobKeys)
			assert.Equal(t, 15, total)
			assert.Zero(t, opened, "payroll records open with bob's keys after a rotation")
			opened, total = rawOpens(t, st, "notes", bobKeys)
			assert.Equal(t, 20, total)
			assert.Equal(t, 20, opened)

			// Everyone else reads everything; the ledger verifies.
			carl := openPerson(t, personCfg(st, "carl", "c"))
			for _, v := range []*vault.Vault{owner, carl} {
				for _, coll := range []string{"notes", "payroll"} {
					n := 0
					for _, err := range vault.CollectionOf[Note](v, coll).List(ctx) {
						require.NoError(t, err)
						n++
					}
					assert.Equal(t, map[string]int{"notes": 20, "payroll": 15}[coll], n)
				}
			}
			got, err = vault.CollectionOf[Note](bob, "notes").Get(ctx, "n-14")
			require.NoError(t, err)
			assert.Equal(t, "note 14", got.Text)
			verified(t, owner)
		})
	}
}

// TestCollectionsOldRecordsStillOpen: a record sealed the way releases
// before collection keys sealed them at generation 2 (a version 2
// envelope under the generation's data key itself, made here by hand)
// still opens for a person without limit.
func TestCollectionsOldRecordsStillOpen(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	rot, err := owner.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	notes := vault.CollectionOf[Note](owner, "notes")
	require.NoError(t, notes.Put(ctx, "n1", Note{Text: "old"}))

	keys := entryKeys(t, st, "olga", "o")
	require.Len(t, keys, 2)
	dk2 := keys[1]
	it, err := st.Get(ctx, "v/team/notes/n1")
	require.NoError(t, err)
	gen, perCol, err := crypto.RecordKeyOf(it.Value)
	require.NoError(t, err)
	require.Equal(t, uint64(2), gen)
	require.True(t, perCol)
	ref := crypto.RecordRef{Vault: "team", Collection: "notes", ID: "n1"}
	plain, rev, err := crypto.OpenRecord(crypto.CollectionKey(dk2, "notes"), it.Value, ref)
	require.NoError(t, err)
	ref.Revision, ref.Generation = rev, 2
	old, err := crypto.SealRecord(dk2, plain, ref)
	require.NoError(t, err)
	require.Equal(t, crypto.RecordEnvelopeVersionGen, old[0])
	_, err = st.Put(ctx, "v/team/notes/n1", old)
	require.NoError(t, err)

	again := openPerson(t, personCfg(st, "olga", "o"))
	got, err := vault.CollectionOf[Note](again, "notes").Get(ctx, "n1")
	require.NoError(t, err)
	assert.Equal(t, "old", got.Text)
	// Written again, it is sealed with the collection's key.
	require.NoError(t, vault.CollectionOf[Note](again, "notes").Put(ctx, "n1", Note{Text: "new"}))
	it, err = st.Get(ctx, "v/team/notes/n1")
	require.NoError(t, err)
	_, perCol, err = crypto.RecordKeyOf(it.Value)
	require.NoError(t, err)
	assert.True(t, perCol)
}

// TestCollectionsThroughHub: olga, on device A of a hub, limits bob to
// "notes". On device B bob opens, syncs, reads and writes notes, and
// takes a number through the hub; his Sync
// pulls the notes and none of the payroll records (his device never holds
// them), and pushes his notes, which olga reads after her Sync. Payroll
// records on the hub do not open with any key bob's entry holds.
func TestCollectionsThroughHub(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	anotes, apay := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](a, "payroll")
	for i := range 5 {
		require.NoError(t, anotes.Put(ctx, fmt.Sprintf("n-%d", i), Note{Text: "note"}))
		require.NoError(t, apay.Put(ctx, fmt.Sprintf("p-%d", i), Note{Text: "salary"}))
	}
	mustSync(t, a)
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	mustSync(t, a)

	b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	mustSync(t, b)
	bnotes := vault.CollectionOf[Note](b, "notes")
	got, err := bnotes.Get(ctx, "n-3")
	require.NoError(t, err)
	assert.Equal(t, "note", got.Text)
	require.NoError(t, bnotes.Put(ctx, "from-bob", Note{Text: "hi"}))
	require.NoError(t, a.BindSeries(ctx, "notes", "memos")) // on the hub, where the numbers are
	seq, err := b.Sequence("memos", sequence.Options{})
	require.NoError(t, err)
	rec, err := bnotes.PutNumbered(ctx, "memo", seq, func(s sequence.Serial) (Note, error) {
		return Note{Text: "memo " + strconv.FormatUint(s.N, 10)}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "memo 1", rec.Text)
	mustSync(t, b)

	// Olga writes more of both; bob's next Sync brings notes only.
	require.NoError(t, anotes.Put(ctx, "n-late", Note{Text: "late"}))
	require.NoError(t, apay.Put(ctx, "p-late", Note{Text: "late salary"}))
	mustSync(t, a)
	mustSync(t, b)
	got, err = bnotes.Get(ctx, "n-late")
	require.NoError(t, err)
	assert.Equal(t, "late", got.Text)
	_, err = vault.CollectionOf[Note](b, "payroll").Get(ctx, "p-late")
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	n := 0
	for range stores.ListUnder(ctx, devB, "v/team/payroll/") {
		n++
	}
	assert.Zero(t, n, "payroll records on bob's device")
	n = 0
	for range stores.ListUnder(ctx, devB, "v/team/notes/") {
		n++
	}
	assert.Equal(t, 8, n, "notes on bob's device")

	got, err = anotes.Get(ctx, "from-bob")
	require.NoError(t, err)
	assert.Equal(t, "hi", got.Text)

	// A reader limited to payroll, on a third device: her Sync pulls the
	// payroll records only.
	devC := memstore.New()
	require.NoError(t, a.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader, "payroll"))
	mustSync(t, a)
	c := openPerson(t, hubPerson(devC, hub, "rita", "r"))
	mustSync(t, c)
	got, err = vault.CollectionOf[Note](c, "payroll").Get(ctx, "p-late")
	require.NoError(t, err)
	assert.Equal(t, "late salary", got.Text)
	_, err = vault.CollectionOf[Note](c, "notes").Get(ctx, "n-late")
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	n = 0
	for range stores.ListUnder(ctx, devC, "v/team/notes/") {
		n++
	}
	assert.Zero(t, n, "notes on rita's device")
	n = 0
	for range stores.ListUnder(ctx, devC, "v/team/payroll/") {
		n++
	}
	assert.Equal(t, 6, n, "payroll records on rita's device")
	// Bob, after the rotation rita's grant made, still syncs and reads.
	mustSync(t, b)
	got, err = bnotes.Get(ctx, "n-late")
	require.NoError(t, err)
	assert.Equal(t, "late", got.Text)

	keys := entryKeys(t, hub, "bob", "b")
	opened, total := rawOpens(t, hub, "payroll", keys)
	assert.Equal(t, 6, total)
	assert.Zero(t, opened)
	opened, total = rawOpens(t, hub, "notes", keys)
	assert.Equal(t, 8, total)
	assert.Equal(t, 8, opened)
	verified(t, a)
}

// TestCollectionsGrantInterrupted: the re-sealing of a limited grant fails
// (a store error in its first pass, as a crash would leave it): Grant
// reports it, bob is granted, the rotation is pending and the records
// not yet re-sealed still open with the first generation's key he holds.
// After a new Open, ResumeRotation finishes it, and then no payroll
// record opens with any key of bob's entry.
func TestCollectionsGrantInterrupted(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	var fail atomic.Bool
	st := faultstore.New(mem, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpList && key == "v/team/p" && fail.CompareAndSwap(true, false) {
			return faultstore.ErrInjected
		}
		return nil
	}})
	owner, err := vault.Open(ctx, personCfg(st, "olga", "o"))
	require.NoError(t, err)
	payroll := vault.CollectionOf[Note](owner, "payroll")
	for i := range 8 {
		require.NoError(t, payroll.Put(ctx, fmt.Sprintf("p-%d", i), Note{Text: "salary"}))
	}
	fail.Store(true)
	err = owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleReader, "notes")
	require.ErrorIs(t, err, faultstore.ErrInjected)
	require.NoError(t, owner.Close())

	bobKeys := entryKeys(t, mem, "bob", "b")
	opened, total := rawOpens(t, mem, "payroll", bobKeys)
	assert.Equal(t, 8, total)
	assert.Equal(t, 8, opened, "not re-sealed yet: open with generation 1")

	owner = openPerson(t, personCfg(mem, "olga", "o"))
	gen, pending, err := owner.PendingRotation(ctx)
	require.NoError(t, err)
	require.True(t, pending)
	assert.Equal(t, uint64(2), gen)
	rot, err := owner.ResumeRotation(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	assert.Equal(t, uint64(8), rot.Progress().Done)
	opened, total = rawOpens(t, mem, "payroll", bobKeys)
	assert.Equal(t, 8, total)
	assert.Zero(t, opened)
	bob := openPerson(t, personCfg(mem, "bob", "b"))
	_, err = vault.CollectionOf[Note](bob, "payroll").Get(ctx, "p-1")
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	verified(t, owner)
}

// TestCollectionsChange: an owner changes bob's collections. Adding
// "memos" wraps its keys without a rotation: bob's next handle reads
// memos, and his keys open every memo. Taking "notes" away rotates: no
// note opens with his keys any more, and the API refuses notes. Giving
// him all collections wraps every data key: payroll opens. Bad input
// writes nothing.
func TestCollectionsChange(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	put := func(coll string, n int) {
		for i := range n {
			require.NoError(t, vault.CollectionOf[Note](owner, coll).Put(ctx, fmt.Sprintf("%s-%d", coll, i), Note{Text: coll}))
		}
	}
	put("notes", 4)
	put("memos", 3)
	put("payroll", 5)
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	put("memos", 6) // memos 0..5, at generation 2
	count := func(coll string) (int, int) { return rawOpens(t, st, coll, entryKeys(t, st, "bob", "b")) }
	opened, total := count("memos")
	require.Equal(t, 6, total)
	require.Zero(t, opened)

	// Bad input: nothing written.
	before := snapshot(t, st)
	rita := openPerson(t, personCfg(st, "rita", "r"))
	assert.ErrorIs(t, rita.SetCollections(ctx, "bob", "memos"), vault.ErrNotPermitted)
	assert.ErrorIs(t, owner.SetCollections(ctx, "nobody", "memos"), vault.ErrNotFound)
	assert.ErrorIs(t, owner.SetCollections(ctx, "olga", "memos"), vault.ErrInvalidArgument)
	assert.ErrorIs(t, owner.SetCollections(ctx, "bob", "_x"), vault.ErrReservedName)
	assert.NoError(t, owner.SetCollections(ctx, "bob", "notes"), "unchanged")
	assert.Equal(t, before, snapshot(t, st), "nothing written")

	// Adding: no rotation.
	require.NoError(t, owner.SetCollections(ctx, "bob", "notes", "memos"))
	_, pending, err := owner.PendingRotation(ctx)
	require.NoError(t, err)
	assert.False(t, pending)
	opened, total = count("memos")
	assert.Equal(t, 6, total)
	assert.Equal(t, 6, opened)
	opened, _ = count("payroll")
	assert.Zero(t, opened)
	for it, err := range stores.ListUnder(ctx, st, "v/team/memos/") {
		require.NoError(t, err)
		gen, _, err := crypto.RecordKeyOf(it.Value)
		require.NoError(t, err)
		assert.Equal(t, uint64(2), gen, "no rotation")
	}
	bob := openPerson(t, personCfg(st, "bob", "b"))
	got, err := vault.CollectionOf[Note](bob, "memos").Get(ctx, "memos-5")
	require.NoError(t, err)
	assert.Equal(t, "memos", got.Text)
	require.NoError(t, bob.Close())

	// Taking notes away: a rotation, and no note opens with bob's keys.
	require.NoError(t, owner.SetCollections(ctx, "bob", "memos"))
	opened, total = count("notes")
	assert.Equal(t, 4, total)
	assert.Zero(t, opened)
	opened, total = count("memos")
	assert.Equal(t, 6, total)
	assert.Equal(t, 6, opened)
	bob = openPerson(t, personCfg(st, "bob", "b"))
	_, err = vault.CollectionOf[Note](bob, "notes").Get(ctx, "notes-1")
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	_, err = vault.CollectionOf[Note](bob, "memos").Get(ctx, "memos-1")
	require.NoError(t, err)
	require.NoError(t, bob.Close())

	// All collections: every data key.
	require.NoError(t, owner.SetCollections(ctx, "bob"))
	opened, total = count("payroll")
	assert.Equal(t, 5, total)
	assert.Equal(t, 5, opened)
	bob = openPerson(t, personCfg(st, "bob", "b"))
	got, err = vault.CollectionOf[Note](bob, "payroll").Get(ctx, "payroll-4")
	require.NoError(t, err)
	assert.Equal(t, "payroll", got.Text)
	people, err := owner.People(ctx)
	require.NoError(t, err)
	for _, p := range people {
		assert.Empty(t, p.Collections, p.Name)
	}
	verified(t, owner)
}

// TestCollectionsConcurrentGrants: two owner handles grant the same
// person, limited, at once: exactly one succeeds, the other gets
// ErrPersonExists, and the person's entry opens.
func TestCollectionsConcurrentGrants(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	a := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "oscar", vault.Secret([]byte("x")), vault.RoleOwner))
	b := openPerson(t, personCfg(st, "oscar", "x"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n", Note{Text: "n"}))
	errs := make(chan error, 2)
	for i, v := range []*vault.Vault{a, b} {
		go func() {
			errs <- v.Grant(ctx, "bob", vault.Secret([]byte("b"+strconv.Itoa(i))), vault.RoleReader, "notes")
		}()
	}
	var ok, exists int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errors.Is(err, vault.ErrPersonExists):
			exists++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	assert.Equal(t, 1, ok)
	assert.Equal(t, 1, exists)
	opened := 0
	for _, secret := range []string{"b0", "b1"} {
		if v, err := vault.Open(ctx, personCfg(st, "bob", secret)); err == nil {
			opened++
			got, err := vault.CollectionOf[Note](v, "notes").Get(ctx, "n")
			require.NoError(t, err)
			assert.Equal(t, "n", got.Text)
			require.NoError(t, v.Close())
		}
	}
	assert.Equal(t, 1, opened)
}
