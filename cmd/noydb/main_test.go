package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// TestMain makes the test binary double as the noydb command, so scripts run
// "noydb …" as a real process with its own exit status.
//
// With $NOYDB_TEST_RUN_MAIN=1 the test binary runs noydb's own main, signal
// handling included (see TestInterruptExits130).
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
	}
	if socket := os.Getenv(envAgentProbe); socket != "" {
		os.Exit(probeAgent(socket))
	}
	testscript.Main(m, map[string]func(){
		"noydb": func() { os.Exit(run(context.Background(), os.Args[1:], osStdio())) },
	})
}

// TestScripts runs testdata/script/*.txtar. Each script gets a cheap KDF (the
// documented test-only variable), a fixed user and no secret unless it sets
// one.
func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams("testdata/script", nil))
}

// TestPostgresScripts runs testdata/postgres/*.txtar with $NOYDB_STORE on the
// test server of scripts/with-postgres, in a schema of their own. Without a
// server they skip (and fail with CI=true), as every PostgreSQL test does.
func TestPostgresScripts(t *testing.T) {
	inSchema := func() string {
		u, err := url.Parse(pgtest.URL(t))
		require.NoError(t, err)
		q := u.Query()
		q.Set("schema", pgtest.Schema(t))
		u.RawQuery = q.Encode()
		return u.String()
	}
	// $NOYDB_TEST_HUB is a second schema, for the scripts that use
	// PostgreSQL as a hub.
	testscript.Run(t, scriptParams("testdata/postgres", map[string]string{envStore: inSchema(), "NOYDB_TEST_HUB": inSchema()}))
}

func scriptParams(dir string, env map[string]string) testscript.Params {
	return testscript.Params{
		Dir: dir,
		Setup: func(e *testscript.Env) error {
			e.Setenv(envTestKDF, "1")
			e.Setenv("USER", "tester")
			// This device's state folders stay in the script's own folder,
			// never in the real user's configuration folder.
			e.Setenv(envStateDir, e.WorkDir+"/.noydb-state")
			// The scripts name their store in the working folder, as they
			// did before the default moved to the user's data folder;
			// default.txtar unsets it to test that default, in a data
			// folder of its own.
			e.Setenv(envStore, "badger:./noydb-data")
			e.Setenv("XDG_DATA_HOME", e.WorkDir+"/.local/share")
			e.Setenv("XDG_STATE_HOME", e.WorkDir+"/.local/state")
			// Never the real user's config file.
			e.Setenv(envConfig, e.WorkDir+"/.config/noydb/config")
			// Never the real user's agent; and an agent a failed script
			// leaves behind is ended with it.
			e.Setenv("XDG_RUNTIME_DIR", e.WorkDir+"/run")
			e.Defer(func() {
				_, _ = callAgent(context.Background(), e.WorkDir+"/run/noydb/agent.sock", agentRequest{Op: "lock"})
			})
			// A race-enabled binary sleeps a second at exit by default; the
			// scripts run noydb a few hundred times.
			e.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			for k, v := range env {
				e.Setenv(k, v)
			}
			return nil
		},
		Cmds: withPlatformCmds(map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":     cmdExits,
			"copydir":   cmdCopyDir,
			"hold":      cmdHold,
			"json":      cmdJSON,
			"tamper":    cmdTamper,
			"linevar":   cmdLineVar,
			"varfile":   cmdVarFile,
			"killafter": cmdKillAfter,
			"jsonlines": cmdJSONLines,
			"onlyfiles": cmdOnlyFiles,
			"waitgone":  cmdWaitGone,
			"tryopen":   cmdTryOpen,
			"filemode":  cmdFileMode,
		}),
	}
}

// withPlatformCmds adds to cmds the commands of this system's own tests
// (platformCmds, in a file per system).
func withPlatformCmds(cmds map[string]func(ts *testscript.TestScript, neg bool, args []string)) map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	for k, v := range platformCmds {
		cmds[k] = v
	}
	return cmds
}

// cmdExits runs a program and checks its exit status, keeping its output for
// stdout and stderr checks:
//
//	exits 2 noydb seq next
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits STATUS PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// cmdCopyDir copies a folder (a badger store no process holds) and all it
// holds to a new folder, as a user copies a vault's store:
//
//	copydir solo solo-copy
func cmdCopyDir(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: copydir SRC DST")
	}
	ts.Check(os.CopyFS(ts.MkAbs(args[1]), os.DirFS(ts.MkAbs(args[0]))))
}

// cmdJSON checks a value in a JSON file (stdout, stderr or a file):
//
//	json stdout .numbers.0.status bound
//	json stdout .numbers|length 3    (the length of an array or object, as in jq)
//
// Strings compare as text, anything else as compact JSON.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 {
		ts.Fatalf("usage: json FILE PATH WANT")
	}
	var data string
	switch args[0] {
	case "stdout":
		data = ts.ReadFile("stdout")
	case "stderr":
		data = ts.ReadFile("stderr")
	default:
		data = ts.ReadFile(args[0])
	}
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		ts.Fatalf("%s is not JSON: %v\n%s", args[0], err, data)
	}
	got, err := jsonPath(v, args[1])
	if err != nil {
		ts.Fatalf("%s: %v", args[1], err)
	}
	if (got == args[2]) == neg {
		ts.Fatalf("%s %s = %s, want %s%s", args[0], args[1], got, map[bool]string{true: "not "}[neg], args[2])
	}
}

func jsonPath(v any, path string) (string, error) {
	length := strings.HasSuffix(path, "|length")
	path = strings.TrimSuffix(path, "|length")
	for _, k := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		if k == "" {
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			e, ok := x[k]
			if !ok {
				return "", fmt.Errorf("no key %q", k)
			}
			v = e
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return "", fmt.Errorf("no index %q in an array of %d", k, len(x))
			}
			v = x[i]
		default:
			return "", fmt.Errorf("cannot index %T with %q", v, k)
		}
	}
	if length {
		switch x := v.(type) {
		case map[string]any:
			return strconv.Itoa(len(x)), nil
		case []any:
			return strconv.Itoa(len(x)), nil
		}
		return "", fmt.Errorf("%T has no length", v)
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// cmdHold opens a store in the test process and keeps it open until the
// script ends, as another noydb process would:
//
//	hold badger:noydb-data
func cmdHold(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: hold STORE")
	}
	spec, err := parseStoreSpec(args[0])
	ts.Check(err)
	if spec.dir != "" {
		spec.dir = ts.MkAbs(spec.dir)
	}
	st, err := openInProcess(context.Background(), spec)
	ts.Check(err)
	ts.Defer(func() { _ = st.Close() })
}

// openInProcess opens spec's store inside the test process. The scripts
// run in parallel, and a child another script forks holds copies of this
// process's open files until it execs noydb: a badger folder's lock, just
// released here by an earlier command, can stay held by such a child for
// that moment. So a locked store is tried again for up to ten seconds; a
// store a noydb process really holds stays locked and fails.
func openInProcess(ctx context.Context, spec storeSpec) (stores.Store, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := spec.open(ctx, true)
		if !errors.Is(err, stores.ErrLocked) || time.Now().After(deadline) {
			return st, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdTamper changes a stored value behind noydb's back, as a hostile or
// broken store would:
//
//	tamper STORE KEY        flip the last bit of the value at KEY
//	tamper STORE KEY drop   delete KEY
//
// KEY may use Go escapes (\x00).
func cmdTamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: tamper STORE KEY [drop]")
	}
	ctx := context.Background()
	spec, err := parseStoreSpec(args[0])
	ts.Check(err)
	if spec.dir != "" {
		spec.dir = ts.MkAbs(spec.dir)
	}
	st, err := openInProcess(ctx, spec)
	ts.Check(err)
	defer st.Close()
	key, err := strconv.Unquote(`"` + args[1] + `"`)
	ts.Check(err)
	if len(args) == 3 {
		if args[2] != "drop" {
			ts.Fatalf("usage: tamper STORE KEY [drop]")
		}
		ts.Check(st.Delete(ctx, key))
		return
	}
	it, err := st.Get(ctx, key)
	ts.Check(err)
	it.Value[len(it.Value)-1] ^= 1
	_, err = st.Put(ctx, key, it.Value)
	ts.Check(err)
}

// cmdKillAfter runs a program, reads its standard error until a line
// matches REGEXP, and then kills it with SIGKILL, as a crash would. The
// program must still be running then (else the kill proves nothing):
//
//	killafter 'imported [3-9][0-9]{4} records' noydb import c invoices.jsonl --progress
func cmdKillAfter(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: killafter REGEXP PROGRAM [ARGS...]")
	}
	re, err := regexp.Compile(args[0])
	ts.Check(err)
	path, err := exec.LookPath(args[1])
	ts.Check(err)
	cmd := exec.Command(path, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	stderr, err := cmd.StderrPipe()
	ts.Check(err)
	ts.Check(cmd.Start())
	sc := bufio.NewScanner(stderr)
	matched := ""
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			matched = sc.Text()
			break
		}
	}
	ts.Check(cmd.Process.Kill())
	_, _ = io.Copy(io.Discard, stderr)
	err = cmd.Wait()
	if matched == "" {
		ts.Fatalf("%s ended (%v) before a line of its standard error matched %q", args[1], err, args[0])
	}
	ts.Logf("killed %s after %q", args[1], matched)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Exited() {
		ts.Fatalf("%s was not killed: %v", args[1], err)
	}
}

// scriptEnv is the environment a script gives the programs it runs: the
// test process's, with the variables scripts set.
func scriptEnv(ts *testscript.TestScript) []string {
	env := os.Environ()
	for _, k := range []string{"HOME", "USER", "TMPDIR", "GORACE", "XDG_DATA_HOME", "XDG_STATE_HOME",
		envSecret, envStore, envVault, envUser, envTestKDF, envStateDir, envConfig, envHub} {
		env = append(env, k+"="+ts.Getenv(k))
	}
	return env
}

// cmdJSONLines writes a file of N JSON lines, one customer each, with a
// code C000001 … that can serve as the id:
//
//	jsonlines big.jsonl 100000
func cmdJSONLines(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonlines FILE N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	w := bufio.NewWriter(f)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, `{"code":"C%06d","name":"Customer %d","city":"Roma","total":%d}`+"\n", i, i, i*3)
	}
	ts.Check(w.Flush())
	ts.Check(f.Close())
}

// cmdOnlyFiles checks that a folder holds exactly the files named (none:
// that it is empty):
//
//	onlyfiles run/noydb agent.sock
func cmdOnlyFiles(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: onlyfiles DIR [NAME...]")
	}
	entries, err := os.ReadDir(ts.MkAbs(args[0]))
	ts.Check(err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(args[1:], " ") {
		ts.Fatalf("%s holds %q, want %q", args[0], got, args[1:])
	}
}

// cmdWaitGone waits until a file no longer exists, failing after TIMEOUT:
// it waits for the event (an agent ending on its idle time), not for a
// time.
//
//	waitgone run/noydb/agent.sock 30s
func cmdWaitGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitgone PATH TIMEOUT")
	}
	d, err := time.ParseDuration(args[1])
	ts.Check(err)
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Lstat(ts.MkAbs(args[0])); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s still exists after %s", args[0], d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdTryOpen opens a store in the test process and closes it at once,
// failing if another process holds it:
//
//	tryopen badger:noydb-data
func cmdTryOpen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: tryopen STORE")
	}
	spec, err := parseStoreSpec(args[0])
	ts.Check(err)
	if spec.dir != "" {
		spec.dir = ts.MkAbs(spec.dir)
	}
	st, err := spec.open(context.Background(), true)
	ts.Check(err)
	ts.Check(st.Close())
}

// cmdFileMode checks the permission bits of a file:
//
//	filemode run/noydb 0700
func cmdFileMode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: filemode PATH MODE")
	}
	want, err := strconv.ParseUint(args[1], 8, 32)
	ts.Check(err)
	fi, err := os.Lstat(ts.MkAbs(args[0]))
	ts.Check(err)
	if got := fi.Mode().Perm(); uint64(got) != want {
		ts.Fatalf("%s has mode %04o, want %04o", args[0], got, want)
	}
}
