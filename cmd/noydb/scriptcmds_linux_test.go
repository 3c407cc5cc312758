//go:build linux

package main

import (
	"context"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// platformCmds are the script commands that need Linux.
var platformCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"killagent": cmdKillAgent,
}

// cmdKillAgent kills the agent answering on SOCKET with SIGKILL and waits
// for its process to end:
//
//	killagent run/noydb/agent.sock
func cmdKillAgent(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: killagent SOCKET")
	}
	rep, err := callAgent(context.Background(), ts.MkAbs(args[0]), agentRequest{Op: "ping"})
	ts.Check(err)
	ts.Check(syscall.Kill(rep.PID, syscall.SIGKILL))
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(rep.PID, 0) == nil {
		if time.Now().After(deadline) {
			ts.Fatalf("agent %d still runs", rep.PID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
