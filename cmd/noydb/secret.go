package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
)

// maxSecretFile bounds what --secret-file reads.
const maxSecretFile = 64 << 10

// secret returns the secret for vault: from --secret-file, else
// $NOYDB_SECRET (empty counts as unset), else a no-echo prompt when standard input is a terminal
// (asked twice when the vault is being created, so a typo does not lock the
// vault with a secret nobody knows). The caller clears it after use.
func (a *app) secret(vaultName string, creating bool) ([]byte, error) {
	if a.fixedSecret != nil {
		return append([]byte(nil), a.fixedSecret...), nil
	}
	if a.secretFile != "" {
		return readSecretFile(a.secretFile, a.insecureSecretFile)
	}
	if s := a.env(envSecret); s != "" {
		return []byte(s), nil
	}
	if !a.io.inTerminal || a.io.readPassword == nil {
		return nil, fmt.Errorf("no secret for vault %q: set $%s, pass --secret-file, or run on a terminal to be asked", vaultName, envSecret)
	}
	prompt := fmt.Sprintf("Secret for vault %q (user %q): ", vaultName, a.user)
	if creating {
		prompt = fmt.Sprintf("New vault %q: choose a secret for user %q: ", vaultName, a.user)
	}
	s, err := a.ask(prompt)
	if err != nil {
		return nil, err
	}
	if creating {
		again, err := a.ask("Repeat the secret: ")
		if err != nil {
			clear(s)
			return nil, err
		}
		same := bytes.Equal(s, again)
		clear(again)
		if !same {
			clear(s)
			return nil, errors.New("the two secrets differ: nothing was created; try again")
		}
	}
	return s, nil
}

func (a *app) ask(prompt string) ([]byte, error) {
	fmt.Fprint(a.io.err, prompt)
	s, err := a.io.readPassword()
	fmt.Fprintln(a.io.err)
	if err != nil {
		return nil, fmt.Errorf("read secret: %w", err)
	}
	if len(s) == 0 {
		return nil, errors.New("empty secret: nothing was opened")
	}
	return s, nil
}

// checkSecretFile refuses --secret-file before anything is opened or
// created when the file is missing or open to group or others; the same
// check runs again on the opened file in readSecretFile.
func (a *app) checkSecretFile() error {
	if a.secretFile == "" || a.fixedSecret != nil {
		return nil
	}
	fi, err := os.Stat(a.secretFile)
	if err != nil {
		return fmt.Errorf("--secret-file: %w", err)
	}
	return secretFileMode("--secret-file", a.secretFile, fi.Mode(), a.insecureSecretFile)
}

// secretFileMode refuses, on Unix, a secret file (named by flag) that group
// or others may read or write, as ssh does with private keys, unless
// insecure is set.
func secretFileMode(flag, path string, mode fs.FileMode, insecure bool) error {
	if insecure || runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		return nil
	}
	if mode.Perm()&0o077 != 0 {
		return fmt.Errorf("%s %s is open to group or others (mode %04o): run 'chmod 600 %s', or pass --insecure-secret-file to use it anyway; nothing was opened",
			flag, path, mode.Perm(), path)
	}
	return nil
}

// readSecretFile reads a --secret-file, dropping one trailing newline (as
// 'echo secret > file' leaves). Unless insecure, a file open to group or
// others is refused.
func readSecretFile(path string, insecure bool) ([]byte, error) {
	return readFlagFile("--secret-file", "the vault's secret", path, insecure)
}

// readFlagFile reads the secret file named by flag, which should hold what:
// see readSecretFile.
func readFlagFile(flag, what, path string, insecure bool) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if err := secretFileMode(flag, path, fi.Mode(), insecure); err != nil {
		return nil, err
	}
	s, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if len(s) > maxSecretFile {
		clear(s)
		return nil, fmt.Errorf("%s %s: longer than %d bytes: is it the right file?", flag, path, maxSecretFile)
	}
	s = bytes.TrimSuffix(s, []byte("\n"))
	s = bytes.TrimSuffix(s, []byte("\r"))
	if len(s) == 0 {
		return nil, fmt.Errorf("%s %s is empty: put %s in it", flag, path, what)
	}
	return s, nil
}
