package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/noydb-go/noydb/vault"
)

// envConfig names the config file instead of the default one.
const envConfig = "NOYDB_CONFIG"

// configKeys are the settings a config file may hold, in the order
// 'noydb config' shows them: the global flags' defaults.
var configKeys = []string{"store", "hub", "vault", "user", "state-dir", "wait"}

// configFile is what a config file holds: settings by key, and where it is.
type configFile struct {
	path   string
	values map[string]string
}

// configPath is the config file: $NOYDB_CONFIG, or noydb/config in the
// user's configuration folder.
func (a *app) configPath() (string, error) {
	if p := a.env(envConfig); p != "" {
		return p, nil
	}
	if a.io.userConfigDir == nil {
		return "", errors.New("no per-user configuration folder")
	}
	dir, err := a.io.userConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "noydb", "config"), nil
}

// loadConfig reads the config file; a missing one holds nothing. Lines are
// "key = value"; blank lines and lines starting with '#' are skipped.
func (a *app) loadConfig() (configFile, error) {
	path, err := a.configPath()
	if err != nil {
		return configFile{}, nil // no folder: no file to read
	}
	cf := configFile{path: path, values: map[string]string{}}
	data, err := readConfigFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cf, nil
	}
	if err != nil {
		return cf, fmt.Errorf("config file %s: %w", path, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok {
			return cf, fmt.Errorf("config file %s, line %d: want key = value", path, n)
		}
		if err := checkSetting(key, value); err != nil {
			return cf, fmt.Errorf("config file %s, line %d: %w", path, n, err)
		}
		cf.values[key] = value
	}
	return cf, sc.Err()
}

// maxConfigBytes bounds the config file: a few settings take a few hundred
// bytes; a larger file (or a device such as /dev/zero) is no config file.
const maxConfigBytes = 64 << 10

// readConfigFile reads the config file at path, at most maxConfigBytes.
func readConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("too large for a config file (over %d KiB)", maxConfigBytes>>10)
	}
	return data, nil
}

// checkSetting reports whether value is a valid value for the config key.
// A value is one line without control characters or surrounding spaces
// (else it would not read back as written, or would write a second
// setting), and a folder is absolute: the config file applies in every
// working folder.
func checkSetting(key, value string) error {
	if strings.IndexFunc(value, unicode.IsControl) >= 0 {
		return fmt.Errorf("%s: the value holds a control character (a line break?)", key)
	}
	if strings.TrimSpace(value) != value {
		return fmt.Errorf("%s: the value starts or ends with a space", key)
	}
	switch key {
	case "store":
		spec, err := parseStoreSpec(value)
		if err == nil && spec.dir != "" && !filepath.IsAbs(spec.dir) {
			return fmt.Errorf("store %q: want an absolute folder, as in %s:%s", value, spec.kind, filepath.Join(string(filepath.Separator)+"srv", "noydb"))
		}
		return err
	case "hub":
		return absHub(value)
	case "vault":
		return vault.CheckVaultName(value)
	case "user":
		if value == "" {
			return errors.New("user: empty")
		}
	case "state-dir":
		if !filepath.IsAbs(value) {
			return fmt.Errorf("state-dir %q: want an absolute folder", value)
		}
	case "wait":
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return fmt.Errorf("wait %q: want a duration such as 5s or 1m", value)
		}
	default:
		return fmt.Errorf("unknown setting %q (known: %s)", key, strings.Join(configKeys, ", "))
	}
	return nil
}

// set writes key = value into the config file, replacing an earlier value
// of key and keeping the other lines; an empty value removes the key.
// A config file that is a symbolic link is written through the link; one
// that is not a regular file (/dev/null, a pipe) is left alone.
func (cf configFile) set(key, value string) error {
	path := cf.path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return errors.New("not a regular file: 'noydb config set' writes only to one")
	}
	data, err := readConfigFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var lines []string
	done := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\r\n")
		k, _, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == key && !strings.HasPrefix(strings.TrimSpace(line), "#") {
			if !done && value != "" {
				lines = append(lines, key+" = "+value)
			}
			done = true
			continue
		}
		lines = append(lines, line)
	}
	if !done && value != "" {
		lines = append(lines, key+" = "+value)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	out := strings.Join(lines, "\n")
	if out != "" {
		out += "\n"
	}
	if err := os.WriteFile(tmp, []byte(out), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
