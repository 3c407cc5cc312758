package ledger_test

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/chacha20poly1305"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// prefix is the vault prefix the tests keep their ledgers under.
const prefix = "v/test/"

// Fixed test keys, so that a child process and its parent share them.
var (
	sealKey  = []byte("0123456789abcdef0123456789abcdef")
	macKey   = []byte("mac key for the ledger tests....")
	otherMAC = []byte("some other MAC key, not the one.")
)

// errOpen is the sealer's one opaque failure.
var errOpen = errors.New("test sealer: message authentication failed")

// sealer is XChaCha20-Poly1305 with a random nonce and the store key as
// associated data, like the vault's.
type sealer struct{ aead cipher.AEAD }

func newSealer(testing.TB) sealer {
	aead, err := chacha20poly1305.NewX(sealKey)
	if err != nil {
		panic(err) // a 32-byte key never fails
	}
	return sealer{aead: aead}
}

func (s sealer) Seal(key string, plaintext []byte) ([]byte, error) {
	out := make([]byte, chacha20poly1305.NonceSizeX, chacha20poly1305.NonceSizeX+len(plaintext)+s.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return s.aead.Seal(out, out, plaintext, []byte(key)), nil
}

// adBuffers holds the buffers Open passes the associated data in (as
// crypto.Open does), so that the benchmarks measure the ledger, not a copy
// of each key.
var adBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 128); return &b }}

func (s sealer) Open(key string, sealed []byte) ([]byte, error) {
	if len(sealed) < chacha20poly1305.NonceSizeX {
		return nil, errOpen
	}
	bp := adBuffers.Get().(*[]byte)
	ad := append((*bp)[:0], key...)
	pt, err := s.aead.Open(nil, sealed[:chacha20poly1305.NonceSizeX], sealed[chacha20poly1305.NonceSizeX:], ad)
	*bp = ad[:0]
	adBuffers.Put(bp)
	if err != nil {
		return nil, errOpen
	}
	return pt, nil
}

// macer is HMAC-SHA256 with each part length-prefixed, like crypto.Key.MAC.
type macer struct{ key []byte }

// macPools holds, by key, HMAC states for reuse (as crypto.MACer does in
// the vault), so that the benchmarks measure the ledger, not hmac.New. A
// lookup costs no allocation, as a crypto.MACer's MAC costs none.
var macPools = struct {
	sync.RWMutex
	m map[string]*sync.Pool
}{m: map[string]*sync.Pool{}}

func macPool(key []byte) *sync.Pool {
	macPools.RLock()
	p := macPools.m[string(key)]
	macPools.RUnlock()
	if p != nil {
		return p
	}
	macPools.Lock()
	defer macPools.Unlock()
	if p = macPools.m[string(key)]; p == nil {
		key := bytes.Clone(key)
		p = &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
		macPools.m[string(key)] = p
	}
	return p
}

func (m macer) MAC(parts ...[]byte) []byte { return m.AppendMAC(nil, parts...) }

func (m macer) AppendMAC(dst []byte, parts ...[]byte) []byte {
	pool := macPool(m.key)
	h := pool.Get().(hash.Hash)
	h.Reset()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	dst = h.Sum(dst)
	pool.Put(h)
	return dst
}

// fixedNow is the clock of the tests: 2026-01-02 03:04:05.000000006 UTC.
var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

// newLedger returns a ledger on st with the test keys and clock.
func newLedger(_ testing.TB, st stores.Store) *ledger.Ledger {
	return ledgerOn(st)
}

// ledgerOn is newLedger for code without a testing.TB (a child process).
func ledgerOn(st stores.Store) *ledger.Ledger {
	return ledger.New(st, newSealer(nil), macer{macKey}, prefix, ledger.Options{
		Actor: "tester",
		Now:   func() time.Time { return fixedNow },
	})
}

// casOnly wraps st so that it has no transactions: the compare-and-swap path.
func casOnly(st stores.Store) stores.Store {
	return faultstore.New(st, faultstore.Options{HideTransactor: true})
}

// storeKinds are the stores every behaviour is checked on: memstore with
// transactions and with compare-and-swap only, and badger in memory. The
// first two must stay first: some tests need only them.
var storeKinds = []struct {
	name string
	make func() stores.Store
}{
	{"tx", func() stores.Store { return memstore.New() }},
	{"cas", func() stores.Store { return casOnly(memstore.New()) }},
	// badger_test.go adds badger in memory.
}

// eachStore runs fn as a subtest on every store kind.
func eachStore(t *testing.T, fn func(t *testing.T, st stores.Store)) {
	t.Helper()
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			st := k.make()
			t.Cleanup(func() { _ = st.Close() })
			fn(t, st)
		})
	}
}

// fact returns a distinct record entry numbered i.
func fact(i int) ledger.Entry {
	return ledger.Entry{
		Kind:       ledger.RecordPut,
		Collection: "invoices",
		ID:         fmt.Sprintf("inv-%d", i),
		Revision:   uint64(i),
		CipherHash: []byte{byte(i), byte(i >> 8)},
		RequestID:  fmt.Sprintf("req-%d", i),
	}
}

// appendN appends n single-entry facts, numbered from 1.
func appendN(tb testing.TB, l *ledger.Ledger, n int) {
	tb.Helper()
	for i := 1; i <= n; i++ {
		_, err := l.Append(context.Background(), fact(i))
		require.NoError(tb, err)
	}
}

// readAll reads the whole ledger, failing on any error.
func readAll(tb testing.TB, l *ledger.Ledger, from uint64) []ledger.Entry {
	tb.Helper()
	var out []ledger.Entry
	for e, err := range l.Read(context.Background(), from) {
		require.NoError(tb, err)
		out = append(out, e)
	}
	return out
}

// readErr reads the ledger and returns the entries before the error, and the error.
func readErr(l *ledger.Ledger, from uint64) ([]ledger.Entry, error) {
	var out []ledger.Entry
	for e, err := range l.Read(context.Background(), from) {
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// entryKey is the store key of position seq in the test ledger.
func entryKey(seq uint64) string {
	return fmt.Sprintf("%s_ledger/%020d", prefix, seq)
}

// headKey is the store key of the test ledger's head.
const headKey = prefix + "_ledger/head"

// raw returns the stored bytes at key.
func raw(tb testing.TB, st stores.Store, key string) []byte {
	tb.Helper()
	it, err := st.Get(context.Background(), key)
	require.NoError(tb, err)
	return it.Value
}

// put writes raw bytes at key.
func put(tb testing.TB, st stores.Store, key string, value []byte) {
	tb.Helper()
	_, err := st.Put(context.Background(), key, value)
	require.NoError(tb, err)
}

// del deletes key.
func del(tb testing.TB, st stores.Store, key string) {
	tb.Helper()
	require.NoError(tb, st.Delete(context.Background(), key))
}

// verifyClean checks that the ledger verifies and has n entries.
func verifyClean(tb testing.TB, l *ledger.Ledger, n uint64) ledger.Report {
	tb.Helper()
	rep, err := l.Verify(context.Background())
	require.NoError(tb, err)
	require.True(tb, rep.OK())
	require.Equal(tb, n, rep.Entries)
	require.Equal(tb, n, rep.Head.Seq)
	return rep
}
