package vault

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
)

// appEvent is an application event as Read gives it back.
type appEvent struct {
	name string
	data string
}

// readEvents reads the whole ledger of v: its kinds in order, and the
// application events.
func readEvents(t *testing.T, v *Vault) (kinds []ledger.Kind, events []appEvent) {
	t.Helper()
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		kinds = append(kinds, e.Kind)
		if name, data, ok := e.Event(); ok {
			events = append(events, appEvent{name, string(data)})
		}
	}
	return kinds, events
}

// An application event made to look like the SDK's own entries (its name a
// kind name, its data the exact encoding of a RecordPut binding a number,
// or random bytes) is read back as an application event, byte for byte,
// and a sequence's audit does not count it: the report is the one taken
// before the events.
func TestRecordedEventIsNeverAnSDKEntry(t *testing.T) {
	ctx := context.Background()
	v := openTestVault(t, memstore.New())
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	n, err := seq.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
	before, err := seq.Audit(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, before.Unbound)

	put, err := ledger.Entry{Seq: 3, Kind: ledger.RecordPut, Actor: "firm", Collection: "invoices", ID: "inv-1",
		Revision: 1, Series: "inv", Number: 1}.MarshalBinary()
	require.NoError(t, err)
	noise := make([]byte, 4096)
	_, err = rand.Read(noise)
	require.NoError(t, err)
	want := []appEvent{
		{"record-put", string(put)},
		{ledger.RecordPut.String(), string(put[1:])},
		{"number-voided", "inv 1"},
		{"noise", string(noise)},
		{"empty", ""},
	}
	for _, e := range want {
		_, err := v.Record(ctx, e.name, []byte(e.data))
		require.NoError(t, err)
	}

	kinds, got := readEvents(t, v)
	assert.Equal(t, []ledger.Kind{ledger.NumberAllocated,
		ledger.AppEvent, ledger.AppEvent, ledger.AppEvent, ledger.AppEvent, ledger.AppEvent}, kinds)
	assert.Equal(t, want, got)
	for e, err := range v.Audit().Read(ctx, 2) {
		require.NoError(t, err)
		assert.Equal(t, "firm", e.Actor, "recorded as the vault's user")
		assert.Empty(t, e.Collection+e.ID+e.Series+e.RequestID, "only the name and data are set")
		assert.Zero(t, e.Number)
	}

	after, err := seq.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the sequence's audit ignores application events")
	// A new handle reads the whole ledger afresh and sees the same.
	fresh := openTestVault(t, v.store)
	fseq, err := fresh.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	again, err := fseq.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, again)
	n, err = fseq.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n, "the counter took nothing from the events")

	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), rep.Entries, "one allocation, five events, one allocation")
}

// A bad event name or data is refused with ErrInvalidArgument, and the store
// is left exactly as it was.
func TestRecordRefusesBadEvents(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openTestVault(t, st)
	_, err := v.Record(ctx, "first", nil)
	require.NoError(t, err)
	cases := map[string]struct {
		name string
		data []byte
	}{
		"empty name":        {"", nil},
		"long name":         {strings.Repeat("a", MaxEventNameLen+1), nil},
		"NUL":               {"a\x00b", nil},
		"newline":           {"a\nb", nil},
		"DEL":               {"a\x7fb", nil},
		"C1 control":        {"a\u0085b", nil},
		"not UTF-8":         {"a\xffb", nil},
		"data too long":     {"big", make([]byte, MaxEventDataLen+1)},
		"long name and NUL": {strings.Repeat("\x00", MaxEventNameLen+1), nil},
	}
	before := storeKeys(t, st)
	for what, c := range cases {
		h, err := v.Record(ctx, c.name, c.data)
		assert.ErrorIs(t, err, ErrInvalidArgument, what)
		assert.Zero(t, h, what)
	}
	assert.Equal(t, before, storeKeys(t, st), "nothing written")

	// The limits themselves are accepted.
	_, err = v.Record(ctx, strings.Repeat("é", MaxEventNameLen/2), make([]byte, MaxEventDataLen))
	require.NoError(t, err)
	h, err := v.Audit().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), h.Seq)
}

// Entries forged in the store behind the vault's back are caught by Verify
// and Read: an entry of the vault copied over the last position, and one
// written there by the SDK's own ledger code under another key (all a
// forger without the vault's keys can make). An entry written past the
// head is not part of the ledger: Read does not yield it and the vault's
// next event takes the position.
func TestForgedEntriesAreCaught(t *testing.T) {
	ctx := context.Background()
	entryKey := func(seq int) string { return fmt.Sprintf("v/books/_ledger/%020d", seq) }
	setup := func(t *testing.T) (*faultstore.Adversary, *Vault) {
		adv := faultstore.NewAdversary(memstore.New())
		v := openTestVault(t, adv.Store())
		for i := range 3 {
			_, err := v.Record(ctx, "event", []byte(fmt.Sprint(i)))
			require.NoError(t, err)
		}
		return adv, v
	}
	requireTampered := func(t *testing.T, v *Vault, at uint64) {
		t.Helper()
		rep, err := v.Audit().Verify(ctx)
		require.ErrorIs(t, err, ledger.ErrTampered)
		assert.Equal(t, at, rep.FirstBad)
		assert.Equal(t, at-1, rep.Entries)
		var last error
		for _, err := range v.Audit().Read(ctx, 1) {
			last = err
		}
		assert.ErrorIs(t, last, ledger.ErrTampered)
	}

	t.Run("copied entry", func(t *testing.T) {
		adv, v := setup(t)
		first, err := adv.Raw().Get(ctx, entryKey(1))
		require.NoError(t, err)
		require.NoError(t, adv.Set(ctx, entryKey(3), first.Value))
		requireTampered(t, v, 3)
	})
	t.Run("forger's ledger", func(t *testing.T) {
		adv, v := setup(t)
		// The forger runs the SDK's ledger on a copy of the store, with keys of its own.
		scratch := memstore.New()
		forger := newLedger()(scratch, forgerSealer{}, forgerMAC{}, "v/books/", wire.LedgerOptions{Actor: "firm"})
		for i := range 3 {
			_, err := forger.Append(ctx, ledger.Entry{Kind: ledger.RecordPut, Collection: "invoices", ID: fmt.Sprint("inv-", i)})
			require.NoError(t, err)
		}
		forged, err := scratch.Get(ctx, entryKey(3))
		require.NoError(t, err)
		require.NoError(t, adv.Set(ctx, entryKey(3), forged.Value))
		requireTampered(t, v, 3)
	})
	t.Run("past the head", func(t *testing.T) {
		adv, v := setup(t)
		first, err := adv.Raw().Get(ctx, entryKey(1))
		require.NoError(t, err)
		require.NoError(t, adv.Set(ctx, entryKey(4), first.Value))
		rep, err := v.Audit().Verify(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), rep.Entries)
		_, err = v.Record(ctx, "next", []byte("mine"))
		require.NoError(t, err)
		_, events := readEvents(t, v)
		assert.Equal(t, appEvent{"next", "mine"}, events[3])
		rep, err = v.Audit().Verify(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(4), rep.Entries)
	})
}

// forgerSealer "seals" by prefixing the key: what a forger without the
// vault's data key can write.
type forgerSealer struct{}

func (forgerSealer) Seal(key string, plaintext []byte) ([]byte, error) {
	return append([]byte(key+"\x00"), plaintext...), nil
}

func (forgerSealer) Open(key string, sealed []byte) ([]byte, error) {
	rest, ok := strings.CutPrefix(string(sealed), key+"\x00")
	if !ok {
		return nil, fmt.Errorf("not sealed for %s", key)
	}
	return []byte(rest), nil
}

// forgerMAC is an unkeyed stand-in for the chain MAC.
type forgerMAC struct{}

func (forgerMAC) MAC(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = fmt.Appendf(b, "%d:%x;", len(p), p)
	}
	if len(b) > 32 {
		b = b[:32]
	}
	return b
}
