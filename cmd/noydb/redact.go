package main

import (
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// A store or hub location can carry a password in three places: the user
// information of a URL (postgres://bob:PW@db/books), a query parameter
// (postgres://bob@db/books?password=PW, sslpassword=PW, …), and a keyword
// connection string (host=db password=PW). Everything the command prints
// about a location goes through redactLocation; an error text that may
// quote one (a driver's) goes through scrubSecrets.

// masked stands for a hidden password.
const masked = "xxxxx"

// secretKey reports whether a URL query parameter or a connection string
// keyword holds a secret: password, sslpassword and their kind.
func secretKey(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"password", "passwd", "pwd", "secret", "token"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// keywordValue matches one "key = value" of a keyword connection string
// (libpq's form): the value is single-quoted, with backslash escapes, or
// runs to the next space.
var keywordValue = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s']*)`)

// looksLikeKeywords reports whether s is a keyword connection string
// rather than a URL or a path: "key=value" first, no "://".
func looksLikeKeywords(s string) bool {
	if strings.Contains(s, "://") {
		return false
	}
	loc := keywordValue.FindStringIndex(s)
	return loc != nil && strings.TrimSpace(s[:loc[0]]) == "" && strings.Contains(s[loc[0]:loc[1]], "=")
}

// redactLocation returns a store or hub location as it may be printed: the
// password of its user information, of every secret query parameter and of
// every secret keyword replaced by xxxxx. A URL that does not parse is cut
// to its scheme; anything else (badger:DIR, file:DIR, mem:) is returned as
// written.
func redactLocation(s string) string {
	if strings.Contains(s, "://") {
		return redactURL(s)
	}
	if strings.Contains(s, "=") {
		return keywordValue.ReplaceAllStringFunc(s, func(kv string) string {
			m := keywordValue.FindStringSubmatch(kv)
			if !secretKey(m[1]) {
				return kv
			}
			return m[1] + m[2] + masked
		})
	}
	return s
}

// redactURL hides the passwords of a URL (see redactLocation); one that
// does not parse is shortened to its scheme.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		if i := strings.Index(s, "://"); i >= 0 {
			return s[:i] + "://…"
		}
		return s
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			if uk, err := url.QueryUnescape(k); err != nil || secretKey(uk) {
				parts[i] = k + "=" + masked
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = "", ""
		return u.Redacted() + "#…"
	}
	return u.Redacted()
}

// locationSecrets returns the secrets a location holds, as written and
// unescaped, longest first, so that a text quoting any of them can be
// scrubbed (scrubSecrets).
func locationSecrets(s string) []string {
	var out []string
	add := func(v string) {
		if v != "" {
			out = append(out, v)
		}
	}
	switch {
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			// Unparsed: whatever follows a colon in the user information.
			rest := s[strings.Index(s, "://")+3:]
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
					add(pw)
				}
			}
			break
		}
		if pw, ok := u.User.Password(); ok {
			add(pw)
		}
		for p := range strings.SplitSeq(u.RawQuery, "&") {
			k, v, _ := strings.Cut(p, "=")
			if uk, err := url.QueryUnescape(k); err != nil || secretKey(uk) {
				add(v)
				if uv, err := url.QueryUnescape(v); err == nil {
					add(uv)
				}
			}
		}
	case strings.Contains(s, "="):
		for _, m := range keywordValue.FindAllStringSubmatch(s, -1) {
			if !secretKey(m[1]) {
				continue
			}
			add(m[3])
			if v, ok := strings.CutPrefix(m[3], "'"); ok {
				v = strings.TrimSuffix(v, "'")
				add(v)
				add(strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(v))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// scrubSecrets replaces in text every secret the locations hold.
func scrubSecrets(text string, locations ...string) string {
	for _, loc := range locations {
		for _, pw := range locationSecrets(loc) {
			text = strings.ReplaceAll(text, pw, masked)
		}
	}
	return text
}

// scrub keeps an error from echoing a secret of the location.
func scrub(err error, location string) error {
	if err == nil {
		return nil
	}
	if s := scrubSecrets(err.Error(), location); s != err.Error() {
		return &scrubbedError{msg: s, err: err}
	}
	return err
}

// scrubbedError is an error whose text lost a secret: it reads as msg and
// still matches what err matches (errors.Is), so the exit status and the
// explanation stay those of err.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
