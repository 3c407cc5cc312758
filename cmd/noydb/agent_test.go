//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envAgentProbe makes the test binary connect to the agent socket it names,
// ask it for a ping and print what it got: the client another user runs.
const envAgentProbe = "NOYDB_TEST_AGENT_PROBE"

func probeAgent(socket string) int {
	conn, err := net.DialTimeout("unix", socket, agentTimeout)
	if err != nil {
		fmt.Println("connect:", err)
		return 0
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(agentTimeout))
	fmt.Fprintln(conn, `{"op":"ping"}`)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		fmt.Println("no answer:", err)
		return 0
	}
	fmt.Println("answer:", strings.TrimSpace(line))
	return 0
}

// agentCLI runs noydb (this test binary running main) in dir with env.
func agentCLI(t *testing.T, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{envRunMain + "=1"}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The agent's socket refuses every other user: the folder keeps them from
// connecting, and were it opened to them, the agent would still not say a
// word to a process of another uid. Its key pages are locked and it makes
// no core dump.
func TestAgentRefusesAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a client under another uid")
	}
	dir := t.TempDir()
	// The other user may walk down to the agent's folder, not into it.
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	run := filepath.Join(dir, "run")
	require.NoError(t, os.Mkdir(run, 0o755))
	socket := filepath.Join(run, "noydb", "agent.sock")
	env := []string{envTestKDF + "=1", envSecret + "=s", envUser + "=olga", envStore + "=badger:" + filepath.Join(dir, "data"),
		envStateDir + "=" + filepath.Join(dir, "state"), envConfig + "=" + filepath.Join(dir, "config"), "XDG_RUNTIME_DIR=" + run}
	for _, args := range [][]string{{"init"}, {"put", "notes", "n1", "{}", "--new"}, {"unlock"}} {
		out, err := agentCLI(t, dir, env, args...)
		require.NoError(t, err, "%v: %s", args, out)
	}
	t.Cleanup(func() { _, _ = callAgent(context.Background(), socket, agentRequest{Op: "lock"}) })

	// The other user's client: a copy of this binary it may run.
	bin := filepath.Join(dir, "probe")
	exe, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, exe, 0o755))
	probe := func() string {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), envAgentProbe+"="+socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	// As the agent made it: the folder is closed to others.
	assert.Contains(t, probe(), "permission denied")
	// Opened to others by mistake: connected, and still refused.
	require.NoError(t, os.Chmod(filepath.Dir(socket), 0o711))
	require.NoError(t, os.Chmod(socket, 0o666))
	got := probe()
	assert.Contains(t, got, "no answer")
	assert.NotContains(t, got, "answer: {")
	require.NoError(t, os.Chmod(socket, 0o600))
	require.NoError(t, os.Chmod(filepath.Dir(socket), 0o700))

	// Its own user still gets answers, and sees how it is protected.
	rep, err := callAgent(context.Background(), socket, agentRequest{Op: "ping"})
	require.NoError(t, err)
	assert.False(t, rep.Dumpable, "core dumps and debuggers off")
	assert.True(t, rep.MemLocked, "key pages locked (root may lock memory)")
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", rep.PID))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^Max core file size +0 +0 +bytes`, string(limits))
	var js map[string]any
	b, _ := json.Marshal(rep)
	require.NoError(t, json.Unmarshal(b, &js))
	assert.NotContains(t, js, "identity", "a ping gives no key")
}

// The agent's environment holds no secret: it keeps what the secret
// unlocked, never the secret.
func TestAgentEnvironmentHoldsNoSecret(t *testing.T) {
	env := agentEnv([]string{"PATH=/bin", envSecret + "=hunter2", envRecoveryCode + "=AAAA-BBBB", "NOYDB_STORE=badger:/x"})
	assert.Equal(t, []string{"PATH=/bin", "NOYDB_STORE=badger:/x", envNoAgent + "=1"}, env)
}
