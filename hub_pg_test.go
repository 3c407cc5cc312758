package noydb_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

const (
	hubChildEnv    = "NOYDB_HUB_CHILD_SCHEMA" // the schema of the hub, for TestHubPGChild
	hubChildURLEnv = "NOYDB_HUB_CHILD_URL"
	hubWorkers     = 8
	hubPerWorker   = 15
)

// openPGHub opens a pgstore on dbURL in schema, closed when the test ends.
func openPGHub(t testing.TB, dbURL, schema string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dbURL, &pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestHubPGChild is a device process of TestHubPGTwoProcesses: it opens the
// vault on its own memory store with the PostgreSQL hub, takes numbers with
// hubWorkers goroutines and prints them, one a line.
func TestHubPGChild(t *testing.T) {
	schema := os.Getenv(hubChildEnv)
	if schema == "" {
		t.Skip("child process of TestHubPGTwoProcesses")
	}
	ctx := context.Background()
	v := openOnHub(t, memstore.New(), openPGHub(t, os.Getenv(hubChildURLEnv), schema), deviceOpts{stateDir: t.TempDir()})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	var mu sync.Mutex
	var out bytes.Buffer
	var wg sync.WaitGroup
	for range hubWorkers {
		wg.Go(func() {
			for range hubPerWorker {
				n, err := q.Next(ctx)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				out.WriteString("number " + strconv.FormatUint(n, 10) + "\n")
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	_, _ = os.Stdout.Write(out.Bytes())
}

// TestHubPGTwoProcesses: two device processes on a PostgreSQL hub, each
// taking numbers with eight goroutines at once, get one gap-free series:
// exactly 1..2*8*N, each once.
func TestHubPGTwoProcesses(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t)
	// The vault is created from one device first; the others fetch it.
	require.NoError(t, openOnHub(t, memstore.New(), openPGHub(t, dbURL, schema), deviceOpts{}).Close())

	outs := make([][]byte, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHubPGChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), hubChildEnv+"="+schema, hubChildURLEnv+"="+dbURL)
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	wg.Wait()
	var got []uint64
	for i, out := range outs {
		require.NoError(t, errs[i], "child %d:\n%s", i, out)
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "number "); ok {
				n, err := strconv.ParseUint(s, 10, 64)
				require.NoError(t, err)
				got = append(got, n)
			}
		}
	}
	slices.Sort(got)
	assert.Equal(t, seq1toN(2*hubWorkers*hubPerWorker), got)
}

// pgProxy forwards TCP connections to a PostgreSQL server until it is
// taken down: then it breaks every open connection and refuses new ones,
// as a server that stopped or a network that failed would.
type pgProxy struct {
	ln     net.Listener
	target string
	down   atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startPGProxy(t testing.TB, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &pgProxy{ln: ln, target: target}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		_ = ln.Close()
		p.setDown(true)
		p.wg.Wait()
	})
	return p
}

func (p *pgProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
	}
}

// setDown takes the proxy down (breaking its connections) or up again.
func (p *pgProxy) setDown(down bool) {
	p.down.Store(down)
	if !down {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestHubPGUnreachable: a device whose PostgreSQL hub cannot be reached
// (connections broken, new ones refused) gets sequence.ErrOffline wrapping
// stores.ErrUnavailable from Next and PutNumbered, takes nothing, and
// still writes records locally; the hub back, numbering resumes at 1.
// pgstore itself reports the failure as stores.ErrUnavailable, and an
// answer of the server (a conflict, a missing key) is not one.
func TestHubPGUnreachable(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	proxy := startPGProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	hub := openPGHub(t, u.String(), schema)

	_, err = hub.Get(ctx, "missing")
	require.ErrorIs(t, err, stores.ErrNotFound)
	assert.NotErrorIs(t, err, stores.ErrUnavailable)
	_, err = hub.CompareAndSwap(ctx, "k", 0, []byte("a"))
	require.NoError(t, err)
	_, err = hub.CompareAndSwap(ctx, "k", 0, []byte("b"))
	require.ErrorIs(t, err, stores.ErrConflict)
	assert.NotErrorIs(t, err, stores.ErrUnavailable)

	v := openOnHub(t, memstore.New(), hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")

	proxy.setDown(true)
	_, err = hub.Get(ctx, "k")
	require.ErrorIs(t, err, stores.ErrUnavailable, "pgstore: %v", err)
	_, err = pgstore.Open(ctx, u.String(), &pgstore.Options{Schema: schema})
	require.ErrorIs(t, err, stores.ErrUnavailable, "pgstore.Open: %v", err)
	_, err = q.Next(ctx)
	require.ErrorIs(t, err, sequence.ErrOffline)
	assert.ErrorIs(t, err, stores.ErrUnavailable)
	_, err = inv.PutNumbered(ctx, "a", q, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil
	})
	require.ErrorIs(t, err, sequence.ErrOffline)
	require.NoError(t, inv.Put(ctx, "b", Invoice{Customer: "ACME"}))

	proxy.setDown(false)
	n, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n)
}
