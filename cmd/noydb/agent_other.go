//go:build !linux

package main

import (
	"errors"
	"net"
	"os"
	"syscall"
)

// agentSupported: the agent needs Linux (peer credentials, locked memory).
const agentSupported = false

func harden() {}

func dumpable() (bool, error) { return true, errors.New("not on this system") }

func newKeyArena(size int) *keyArena { return &keyArena{buf: make([]byte, size)} }

func peerUID(*net.UnixConn) (int, error) { return -1, errors.New("no peer credentials on this system") }

func fileUID(os.FileInfo) (int, bool) { return 0, false }

func detached() *syscall.SysProcAttr { return nil }
