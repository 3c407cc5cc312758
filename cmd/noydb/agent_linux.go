//go:build linux

package main

import (
	"errors"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// agentSupported: the agent runs here.
const agentSupported = true

// harden keeps the agent's memory to itself: no core dump (RLIMIT_CORE 0,
// and PR_SET_DUMPABLE 0, which also keeps other processes of the same
// user from attaching a debugger or reading /proc/PID/mem).
func harden() {
	_ = unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0})
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// dumpable reports PR_GET_DUMPABLE, for the tests.
func dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return v != 0, err
}

// newKeyArena maps size bytes apart from the Go heap and locks them in
// memory (mlock) where the system allows it; elsewhere it still keeps the
// bytes apart, and wipes them at the end.
func newKeyArena(size int) *keyArena {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return &keyArena{buf: make([]byte, size)}
	}
	// No copy of these pages in a child process, nor in a core dump.
	_ = unix.Madvise(b, unix.MADV_DONTFORK)
	_ = unix.Madvise(b, unix.MADV_DONTDUMP)
	a := &keyArena{buf: b, locked: unix.Mlock(b) == nil}
	a.unmap = func() {
		if a.locked {
			_ = unix.Munlock(b)
		}
		_ = unix.Munmap(b)
	}
	return a
}

// peerUID is the user id of the process at the other end of conn
// (SO_PEERCRED).
func peerUID(conn *net.UnixConn) (int, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	if cred == nil {
		return -1, errors.New("no peer credentials")
	}
	return int(cred.Uid), nil
}

// fileUID is the owner of a file.
func fileUID(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// detached runs the agent in a session of its own, away from the
// terminal's signals.
func detached() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}
