//go:build !linux

package main

import "github.com/rogpeppe/go-internal/testscript"

// platformCmds are the script commands that need Linux: none here.
var platformCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){}
