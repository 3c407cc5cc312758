package main

import (
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdLineVar sets an environment variable to one line of a file, so a
// script can pass printed output (a recovery code, a public key) on:
//
//	linevar CODE1 codes.txt 1
func cmdLineVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: linevar VAR FILE N")
	}
	n, err := strconv.Atoi(args[2])
	if err != nil || n < 1 {
		ts.Fatalf("linevar: line %q", args[2])
	}
	lines := strings.Split(strings.TrimRight(ts.ReadFile(args[1]), "\n"), "\n")
	if n > len(lines) {
		ts.Fatalf("linevar: %s has %d lines", args[1], len(lines))
	}
	ts.Setenv(args[0], strings.TrimSpace(lines[n-1]))
}
