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
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// agentState is what a running agent holds: the identities of the vaults
// unlocked, in memory locked against swapping where the system allows.
type agentState struct {
	mu      sync.Mutex
	arena   *keyArena
	entries map[string][]byte // by agentKey: an identity's text, in the arena
	idle    time.Duration
	timer   *time.Timer
	stop    chan struct{}
	once    sync.Once
}

// serveAgent runs the agent: it reads its first vault from in (the
// process that started it holds the other end), listens on socket, says
// on out that it is ready, and serves until it is locked, stays unused for
// its idle time, or is asked to stop by a signal. It then wipes what it
// held and removes its socket. It writes no other file.
func serveAgent(ctx context.Context, socket string, in io.Reader, out io.Writer) error {
	if socket == "" {
		return usagef("--socket is required")
	}
	harden() // no core dump, no ptrace by others (agent_linux.go)
	s := &agentState{entries: map[string][]byte{}, stop: make(chan struct{})}
	s.arena = newKeyArena(64 << 10)
	defer s.arena.wipe()

	reply := func(rep agentReply) {
		b, _ := json.Marshal(rep)
		_, _ = out.Write(append(b, '\n'))
	}
	first, err := bufio.NewReader(io.LimitReader(in, 1<<16)).ReadBytes('\n')
	var req agentRequest
	if err == nil {
		err = json.Unmarshal(first, &req)
	}
	clear(first)
	if err != nil || req.Op != "add" {
		reply(agentReply{Error: fmt.Sprintf("no vault handed over: %v", err)})
		return nil
	}
	ln, err := listenAgent(socket)
	if err != nil {
		reply(agentReply{Error: err.Error()})
		return nil
	}
	defer ln.Close() // removes the socket
	rep := s.add(req)
	req.Identity = ""
	if !rep.OK {
		reply(rep)
		return nil
	}
	rep.PID = os.Getpid()
	reply(rep)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
		case <-s.stop:
		}
		s.end()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			select {
			case <-s.stop:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			continue
		}
		s.serve(conn.(*net.UnixConn))
	}
}

// listenAgent makes the socket's folder (the user's own, closed to
// others), removes a socket a killed agent left there, and listens.
func listenAgent(socket string) (*net.UnixListener, error) {
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("agent folder: %w", err)
	}
	if err := checkAgentDir(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(socket); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("agent socket %s: a file that is no socket is there", socket)
		}
		if conn, err := net.DialTimeout("unix", socket, agentTimeout); err == nil {
			conn.Close()
			return nil, fmt.Errorf("agent socket %s: another agent answers there", socket)
		}
		if err := os.Remove(socket); err != nil {
			return nil, fmt.Errorf("agent socket: %w", err)
		}
	}
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return ln, nil
}

// serve answers one request on conn: only from a process of the agent's
// own user.
func (s *agentState) serve(conn *net.UnixConn) {
	defer conn.Close()
	if uid, err := peerUID(conn); err != nil || uid != os.Getuid() {
		return // another user: not a word
	}
	_ = conn.SetDeadline(time.Now().Add(agentTimeout))
	b, err := bufio.NewReader(io.LimitReader(conn, 1<<16)).ReadBytes('\n')
	var req agentRequest
	if err == nil {
		err = json.Unmarshal(b, &req)
	}
	clear(b)
	if err != nil {
		return
	}
	var rep agentReply
	switch req.Op {
	case "add":
		rep = s.add(req)
	case "get":
		rep = s.get(req.Key)
	case "ping":
		rep = s.ping()
	case "lock":
		rep = s.ping()
		defer s.once.Do(func() { close(s.stop) })
	default:
		rep = agentReply{Error: "unknown request"}
	}
	req.Identity = ""
	out, _ := json.Marshal(rep)
	_, _ = conn.Write(append(out, '\n'))
	clear(out)
	rep.Identity = ""
}

// add keeps an identity and sets the idle time.
func (s *agentState) add(req agentRequest) agentReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.Idle != "" {
		d, err := time.ParseDuration(req.Idle)
		if err != nil || d <= 0 {
			return agentReply{Error: "bad idle time"}
		}
		s.idle = d
	}
	if s.idle <= 0 {
		s.idle = defaultAgentIdle
	}
	if old, ok := s.entries[req.Key]; ok {
		clear(old)
	}
	b, ok := s.arena.store(req.Identity)
	if !ok {
		return agentReply{Error: "the agent holds too many vaults"}
	}
	s.entries[req.Key] = b
	s.touchLocked()
	return agentReply{OK: true, PID: os.Getpid(), Vaults: len(s.entries), Idle: s.idle.String()}
}

func (s *agentState) get(key string) agentReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.entries[key]
	if !ok {
		return agentReply{}
	}
	s.touchLocked()
	return agentReply{OK: true, Identity: string(b)}
}

func (s *agentState) ping() agentReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := dumpable()
	return agentReply{OK: true, PID: os.Getpid(), Vaults: len(s.entries), Idle: s.idle.String(), Dumpable: d || err != nil, MemLocked: s.arena.locked}
}

// touchLocked restarts the idle timer. s.mu is held.
func (s *agentState) touchLocked() {
	if s.timer == nil {
		s.timer = time.AfterFunc(s.idle, func() { s.once.Do(func() { close(s.stop) }) })
		return
	}
	s.timer.Reset(s.idle)
}

// end wipes what the agent holds.
func (s *agentState) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, b := range s.entries {
		clear(b)
		delete(s.entries, k)
	}
	if s.timer != nil {
		s.timer.Stop()
	}
}

// keyArena is memory for secrets: mapped apart from the Go heap, locked
// against swapping where the system allows, wiped at the end.
type keyArena struct {
	buf    []byte
	used   int
	locked bool
	unmap  func()
}

// store copies s into the arena; ok is false when it is full.
func (a *keyArena) store(s string) ([]byte, bool) {
	if a.used+len(s) > len(a.buf) {
		return nil, false
	}
	b := a.buf[a.used : a.used+len(s) : a.used+len(s)]
	copy(b, s)
	a.used += len(s)
	return b, true
}

func (a *keyArena) wipe() {
	clear(a.buf)
	if a.unmap != nil {
		a.unmap()
	}
}
