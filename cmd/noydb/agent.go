package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/crypto"
)

// The agent keeps, for the person who ran 'noydb unlock', the key material
// each vault opens with (the identity vault.DeriveIdentity unlocks from
// the secret), so that later commands skip the key derivation. It holds no
// store, so it locks nothing; it answers only its own user, on a socket in
// a folder only that user can open, and ends after an idle time, on 'noydb
// lock', or with its process. It writes no file but its socket.

// Environment variables of the agent.
const (
	// envAgentSock names the agent's socket instead of the default one.
	envAgentSock = "NOYDB_AGENT_SOCK"
	// envNoAgent=1 makes commands ignore a running agent.
	envNoAgent = "NOYDB_NO_AGENT"
)

// defaultAgentIdle is how long an agent lives without being used.
const defaultAgentIdle = 10 * time.Minute

// agentTimeout bounds one exchange with the agent.
const agentTimeout = 2 * time.Second

// agentRequest is one line a client sends; agentReply the agent's answer.
type agentRequest struct {
	Op       string `json:"op"` // add, get, lock, ping
	Key      string `json:"key,omitempty"`
	Identity string `json:"identity,omitempty"`
	Idle     string `json:"idle,omitempty"`
}

type agentReply struct {
	OK       bool   `json:"ok"`
	Identity string `json:"identity,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Vaults   int    `json:"vaults,omitempty"`
	Idle     string `json:"idle,omitempty"`
	Error    string `json:"error,omitempty"`
	// Dumpable and MemLocked, in a ping's reply, say how the agent
	// protects what it holds: dumpable is false once core dumps and
	// debuggers are off, mem_locked true when its key pages are locked.
	Dumpable  bool `json:"dumpable"`
	MemLocked bool `json:"mem_locked"`
}

// agentKey names what an identity opens: the store's location, the vault
// and the user.
func agentKey(location, vaultName, user string) string {
	return location + "\x00" + vaultName + "\x00" + user
}

// agentSocket is the agent's socket: $NOYDB_AGENT_SOCK, else
// agent.sock in noydb under $XDG_RUNTIME_DIR, else in noydb-UID under the
// temporary folder.
func (a *app) agentSocket() string {
	if p := a.env(envAgentSock); p != "" {
		return p
	}
	if d := a.env("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "noydb", "agent.sock")
	}
	return filepath.Join(os.TempDir(), "noydb-"+strconv.Itoa(os.Getuid()), "agent.sock")
}

// errNoAgent: no agent answers on the socket.
var errNoAgent = errors.New("no agent running")

// callAgent sends req to the agent on socket and returns its reply. The
// socket's folder must be the user's own and closed to others, and the
// process answering must run as the user (peerUID): else nothing is sent.
func callAgent(ctx context.Context, socket string, req agentRequest) (agentReply, error) {
	if err := checkAgentDir(filepath.Dir(socket)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return agentReply{}, errNoAgent
		}
		return agentReply{}, err
	}
	d := net.Dialer{Timeout: agentTimeout}
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return agentReply{}, errNoAgent
		}
		return agentReply{}, fmt.Errorf("agent %s: %w", socket, err)
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return agentReply{}, fmt.Errorf("agent %s: not a unix socket", socket)
	}
	if uid, err := peerUID(uc); err != nil || uid != os.Getuid() {
		return agentReply{}, fmt.Errorf("agent %s: the process on the socket is not yours (uid %d, %v): nothing sent", socket, uid, err)
	}
	_ = conn.SetDeadline(time.Now().Add(agentTimeout))
	line, err := json.Marshal(req)
	if err != nil {
		return agentReply{}, err
	}
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return agentReply{}, fmt.Errorf("agent %s: %w", socket, err)
	}
	var rep agentReply
	b, err := bufio.NewReader(io.LimitReader(conn, 1<<20)).ReadBytes('\n')
	if err != nil {
		return agentReply{}, fmt.Errorf("agent %s: no answer: %w", socket, err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return agentReply{}, fmt.Errorf("agent %s: bad answer: %w", socket, err)
	}
	clear(b)
	return rep, nil
}

// checkAgentDir refuses an agent folder that is not the user's own or that
// others may enter: whoever can write there could pose as the agent.
func checkAgentDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("agent folder %s is not a folder", dir)
	}
	if uid, ok := fileUID(fi); ok && uid != os.Getuid() {
		return fmt.Errorf("agent folder %s belongs to uid %d, not to you: not used", dir, uid)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("agent folder %s is open to others (mode %04o): not used", dir, fi.Mode().Perm())
	}
	return nil
}

// agentIdentity asks a running agent for the identity that opens vault
// name as user on the store at location; ok is false when no agent holds
// one (or commands are told to ignore it).
func (a *app) agentIdentity(ctx context.Context, location, name, user string) (*crypto.Identity, bool) {
	if location == "" || a.env(envNoAgent) == "1" {
		return nil, false
	}
	rep, err := callAgent(ctx, a.agentSocket(), agentRequest{Op: "get", Key: agentKey(location, name, user)})
	if err != nil || !rep.OK || rep.Identity == "" {
		if err != nil && !errors.Is(err, errNoAgent) {
			fmt.Fprintf(a.io.err, "note: %v; deriving the key as usual\n", err)
		}
		return nil, false
	}
	id, err := crypto.ParseIdentity(rep.Identity)
	rep.Identity = ""
	if err != nil {
		return nil, false
	}
	return id, true
}

func (a *app) unlockCmd() *cobra.Command {
	var idle time.Duration
	cmd := &cobra.Command{
		Use:   "unlock",
		Short: "Keep this vault unlocked in an agent, so commands skip the key derivation",
		Long: `Unlock --vault for --user once (the secret is read as by every command,
and the key derivation paid once), and keep what it unlocks in an agent:
a background process of yours, like ssh-agent, that later commands ask
instead of deriving again, so each takes milliseconds instead of about a
second. Every command the agent serves says so on standard error, with
the vault and the user it acts as.

The agent holds the unlocked key of each vault unlocked this way, and
nothing else: no store (so it holds no store's lock, and other programs
keep using the store), no secret. It answers only your user, on a socket
in a folder only you can open ($XDG_RUNTIME_DIR/noydb/agent.sock, or
$NOYDB_AGENT_SOCK); its memory is locked against swapping where the system
allows, and it makes no core dump. It writes no file but its socket. It
ends after --idle without being used (10 minutes by default), with
'noydb lock', or when it is killed; the next command then derives the key
again. $NOYDB_NO_AGENT=1 makes a command ignore it.

It prints what it unlocked, or with --json {"vault", "user", "store",
"socket", "pid", "idle"}.`,
		Example: `  noydb unlock --vault books
  noydb --vault books put invoices inv-9 '{"total":80}'   # no derivation
  noydb lock`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !agentSupported {
				return errors.New("the agent needs Linux (peer credentials, locked memory); every command derives the key here")
			}
			if idle <= 0 {
				return usagef("--idle %s: want a duration above zero, such as 10m", idle)
			}
			spec, err := a.parsedStore()
			if err != nil {
				return err
			}
			if spec.kind == "mem" {
				return usagef("unlock: mem: keeps nothing between commands, so there is nothing to keep unlocked")
			}
			if a.identityFile != "" || a.recoverFlag || a.recoveryCodeFile != "" {
				return usagef("unlock: the agent keeps what a secret unlocks; --identity-file and --recover open without a derivation already")
			}
			a.deriveForAgent = true
			if _, err := a.openVault(cmd.Context()); err != nil {
				return err
			}
			loc, err := a.spec.location()
			if err != nil {
				return err
			}
			text, err := crypto.EncodeIdentity(a.unlocked)
			a.unlocked.Wipe()
			if err != nil {
				return err
			}
			socket := a.agentSocket()
			req := agentRequest{Op: "add", Key: agentKey(loc, a.vaultName, a.user), Identity: text, Idle: idle.String()}
			rep, err := callAgent(cmd.Context(), socket, req)
			if errors.Is(err, errNoAgent) {
				rep, err = startAgent(socket, req)
			}
			text, req.Identity = "", ""
			if err != nil {
				return err
			}
			if !rep.OK {
				return fmt.Errorf("agent %s refused: %s", socket, rep.Error)
			}
			if a.json {
				return a.printJSON(struct {
					Vault  string `json:"vault"`
					User   string `json:"user"`
					Store  string `json:"store"`
					Socket string `json:"socket"`
					PID    int    `json:"pid"`
					Idle   string `json:"idle"`
				}{a.vaultName, a.user, a.spec.String(), socket, rep.PID, rep.Idle})
			}
			_, err = fmt.Fprintf(a.io.out, "unlocked vault %q for %s on %s: commands skip the key derivation until 'noydb lock' or %s unused (agent pid %d)\n",
				a.vaultName, a.user, a.spec, rep.Idle, rep.PID)
			return err
		},
	}
	cmd.Flags().DurationVar(&idle, "idle", defaultAgentIdle, "end the agent after this long without a command (a running agent takes the new value)")
	return cmd
}

func (a *app) lockCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "lock",
		Short: "End the agent: every vault it kept unlocked needs the secret again",
		Long: `End the agent 'noydb unlock' started: it forgets every vault it kept
unlocked, removes its socket and exits. Later commands derive the key from
the secret again. Without an agent it says so; that is no failure.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			socket := a.agentSocket()
			rep, err := callAgent(cmd.Context(), socket, agentRequest{Op: "lock"})
			if errors.Is(err, errNoAgent) {
				stale := removeStaleSocket(socket)
				if a.json {
					return a.printJSON(map[string]any{"locked": false, "socket": socket})
				}
				msg := "no agent running: nothing to lock"
				if stale {
					msg += " (removed the socket a killed agent left)"
				}
				_, err := fmt.Fprintln(a.io.out, msg)
				return err
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"locked": true, "socket": socket, "vaults": rep.Vaults, "pid": rep.PID})
			}
			_, err = fmt.Fprintf(a.io.out, "locked: the agent (pid %d) forgot %s and ended\n", rep.PID, plural(rep.Vaults, "vault", "vaults"))
			return err
		},
	}
}

// removeStaleSocket removes socket when it is a socket no agent answers
// on (one a killed agent left), reporting whether it did.
func removeStaleSocket(socket string) bool {
	if checkAgentDir(filepath.Dir(socket)) != nil {
		return false
	}
	fi, err := os.Lstat(socket)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return false
	}
	if conn, err := net.DialTimeout("unix", socket, agentTimeout); err == nil {
		conn.Close()
		return false
	}
	return os.Remove(socket) == nil
}

// startAgent starts an agent process on socket, hands it req (the first
// vault) through a pipe, never the command line or the environment, and
// waits for it to answer.
func startAgent(socket string, req agentRequest) (agentReply, error) {
	exe, err := os.Executable()
	if err != nil {
		return agentReply{}, fmt.Errorf("start agent: %w", err)
	}
	cmd := exec.Command(exe, agentServeName, "--socket", socket)
	cmd.Env = agentEnv(os.Environ())
	cmd.SysProcAttr = detached()
	in, err := cmd.StdinPipe()
	if err != nil {
		return agentReply{}, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return agentReply{}, err
	}
	if err := cmd.Start(); err != nil {
		return agentReply{}, fmt.Errorf("start agent: %w", err)
	}
	line, err := json.Marshal(req)
	if err == nil {
		_, err = in.Write(append(line, '\n'))
	}
	clear(line)
	in.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return agentReply{}, fmt.Errorf("start agent: %w", err)
	}
	b, err := bufio.NewReader(out).ReadBytes('\n')
	var rep agentReply
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil || !rep.OK {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if rep.Error != "" {
			return agentReply{}, fmt.Errorf("start agent: %s", rep.Error)
		}
		return agentReply{}, fmt.Errorf("start agent: it did not start: %v", err)
	}
	// The agent lives on alone; its exit is not this process's business.
	_ = cmd.Process.Release()
	return rep, nil
}

// agentEnv is the environment of the agent: this process's without the
// secrets it may hold (the agent keeps what they unlocked, never them).
func agentEnv(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == envSecret || k == envRecoveryCode {
			continue
		}
		out = append(out, kv)
	}
	return append(out, envNoAgent+"=1")
}

// agentServeName is the hidden command that runs the agent.
const agentServeName = "agent-serve"

func (a *app) agentServeCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:    agentServeName,
		Short:  "Run the agent (started by 'noydb unlock')",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return serveAgent(cmd.Context(), socket, a.io.in, a.io.out)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the socket to listen on")
	return cmd
}

// agentNote says, on standard error, that the agent opened the vault and
// as whom.
func (a *app) agentNote() {
	fmt.Fprintf(a.io.err, "note: the agent unlocked vault %q as %s ('noydb lock' forgets it)\n", a.vaultName, a.user)
}
