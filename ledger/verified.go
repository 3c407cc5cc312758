package ledger

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"iter"
	"slices"
)

// VerifiedReader is implemented by a vault's ledger. ReadVerified is Read
// that also checks who wrote what: it yields an entry only once the
// commit it belongs to is shown signed by its author, with a key the
// people state st gives them at that position (a grant of theirs held
// there, or, before the ledger introduced them, the key vouch returns and
// no recorded revocation), and only when their role allowed every entry
// of the commit there (Verify's rules: a reader writes no record, a
// person limited to some collections none of another, a revoked person
// nothing). st is the people state of the ledger (see PeopleReplayer);
// it is only read, and the entries after its position are left to a
// later read, with a later state. The first problem is yielded once, a
// *SignatureError (ErrBadSignature, ErrTampered) at its position, and ends
// the sequence; so do the chain problems Read yields. A sync reads a hub's
// feed so: a change someone holding the chain key appended in another's
// name, or beyond their role, is never applied.
type VerifiedReader interface {
	ReadVerified(ctx context.Context, from uint64, st *PeopleState, vouch PeopleVouch) iter.Seq2[Entry, error]
}

// authorsAt returns the grants under which actor may have written at
// position seq, the likeliest first (the signature decides among them), a
// problem when there is none:
//
//   - the grant of theirs the ledger holds there;
//   - the key the caller vouches for (their keyring entry), when the
//     ledger had not named it for them by seq: a person the ledger has
//     not introduced yet, or one granted again (on a device that has not
//     synced since) after a grant or a revocation it holds, whose new
//     grant it records later or not yet; a key the ledger revoked, or
//     whose grant ended, by seq never holds;
//   - with the vouched role, a key a later revocation of the ledger names
//     as theirs (an owner's signed word that it was) and that no grant
//     of the ledger introduced by seq: they wrote before the ledger heard
//     of them, and were revoked and granted again since, so that their
//     keyring entry names the new key only.
func (st *PeopleState) authorsAt(actor string, seq uint64, vouch PeopleVouch) ([]GrantSpan, SignatureProblem) {
	var out []GrantSpan
	problem := UnknownSigner
	p := st.people[actor]
	if p != nil {
		if g, ok := p.grantAt(seq); ok {
			out = append(out, g)
		} else if len(p.Spans) > 0 && seq >= p.Spans[0].From {
			problem = Revoked // after a grant of theirs ended
		}
		if p.Revoked && p.Key == nil && p.RevokedSeq <= seq && len(out) == 0 {
			// A revocation that named no key, of a person the ledger
			// gave none: it ended whatever they held.
			return out, Revoked
		}
	}
	var v Vouched
	ok := vouch != nil
	if ok {
		v, ok = vouch(actor)
	}
	if !ok || len(v.Key) != signingKeySize {
		if len(out) > 0 {
			problem = 0
		}
		return out, problem
	}
	if p == nil {
		out = append(out, GrantSpan{Key: v.Key, Role: v.Role})
		for _, k := range append([][]byte{v.Earlier}, v.Renewed...) {
			if len(k) == signingKeySize {
				out = append(out, GrantSpan{Key: k, Role: v.Role})
			}
		}
		return out, 0
	}
	for _, k := range append([][]byte{v.Key, v.Earlier}, v.Renewed...) {
		if len(k) != signingKeySize {
			continue
		}
		if p.namedBy(k, seq) {
			if len(out) == 0 {
				problem = Revoked
			}
			continue
		}
		if !slices.ContainsFunc(out, func(g GrantSpan) bool { return bytes.Equal(g.Key, k) }) {
			out = append(out, GrantSpan{Key: k, Role: v.Role})
		}
	}
	for i, k := range p.RevokedKeys {
		if p.RevokedAt[i] > seq && !p.namedBy(k, seq) &&
			!slices.ContainsFunc(out, func(g GrantSpan) bool { return bytes.Equal(g.Key, k) }) {
			out = append(out, GrantSpan{Key: k, Role: v.Role})
		}
	}
	if len(out) > 0 {
		problem = 0
	}
	return out, problem
}

// namedBy reports whether the ledger named key as p's by position seq:
// granted it before seq, or revoked it at or before seq.
func (p *PersonState) namedBy(key []byte, seq uint64) bool {
	for _, g := range p.Spans {
		if bytes.Equal(g.Key, key) && (g.From == 0 || g.From-1 < seq) {
			return true
		}
	}
	for i, k := range p.RevokedKeys {
		if bytes.Equal(k, key) && p.RevokedAt[i] <= seq {
			return true
		}
	}
	return false
}

// unsignedAt reports whether an unsigned entry at seq is one of a ledger
// of layout version 1 before its first signed entry (its first upgrade).
func (st *PeopleState) unsignedAt(seq uint64) bool {
	if !st.legacy {
		return false
	}
	for _, p := range st.people {
		if p.Legacy && p.Seq > 0 && p.Seq <= seq {
			return false
		}
	}
	return true
}

// ReadVerified reads the entries from position from as Read does, and
// checks their commits' signatures and authors (see VerifiedReader).
func (l *ledger) ReadVerified(ctx context.Context, from uint64, st *PeopleState, vouch PeopleVouch) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if from == 0 {
			from = 1
		}
		if err := l.enter(); err != nil {
			yield(Entry{}, err)
			return
		}
		hs, _, err := l.loadHead(ctx)
		l.gate.Exit()
		if err != nil {
			yield(Entry{}, err)
			return
		}
		if from > hs.Seq {
			return
		}
		// Start at the commit that holds from: its Covered entries
		// before from are vouched for by the same signature.
		start := from
		for start > 1 {
			r, err := l.recordAt(ctx, hs, start-1)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			if !r.entry.Covered {
				break
			}
			start--
		}
		var (
			run     []Entry
			bad     *SignatureError
			stopped bool
		)
		fail := func(seq uint64, actor string, p SignatureProblem) bool {
			bad = &SignatureError{Seq: seq, Actor: actor, Problem: p}
			return false
		}
		emit := func(es []Entry) bool {
			for _, e := range es {
				if e.Seq >= from && !yield(e, nil) {
					stopped = true
					return false
				}
			}
			return true
		}
		_, err = l.walk(ctx, start, false, func(r record, prev []byte) bool {
			e := r.entry
			if e.Seq >= st.Next() && len(run) == 0 {
				return false // after what st replayed: the next read
			}
			switch {
			case len(e.Signature) == 0 && !e.Covered:
				if len(run) > 0 {
					return fail(run[0].Seq, run[0].Actor, Unsigned)
				}
				if !st.unsignedAt(e.Seq) {
					return fail(e.Seq, e.Actor, Unsigned)
				}
				return emit([]Entry{e})
			case len(run) > 0 && run[0].Actor != e.Actor:
				return fail(run[0].Seq, run[0].Actor, BadSignature)
			case e.Covered:
				run = append(run, e)
				return true
			}
			grants, problem := st.authorsAt(e.Actor, e.Seq, vouch)
			if problem == 0 {
				for _, p := range run {
					if p.Kind == KeyringUpgraded && p.ID == e.Actor {
						grants, problem = []GrantSpan{{Key: p.SigningKey, Role: roleOwner}}, 0
					}
				}
				if e.Kind == KeyringUpgraded && e.ID == e.Actor && len(e.SigningKey) == signingKeySize {
					grants = []GrantSpan{{Key: e.SigningKey, Role: roleOwner}}
				}
			}
			if problem != 0 {
				first := e.Seq
				if len(run) > 0 {
					first = run[0].Seq
				}
				return fail(first, e.Actor, problem)
			}
			enc := r.enc()
			msg := signedMessage(nil, prev, enc[:len(enc)-1-signatureSize], uint64(len(run)))
			i := slices.IndexFunc(grants, func(g GrantSpan) bool { return ed25519.Verify(g.Key, msg, e.Signature) })
			if i < 0 {
				return fail(e.Seq, e.Actor, BadSignature)
			}
			g := grants[i]
			commit := append(run, e)
			for i := range commit {
				c := &commit[i]
				if !permitted(g.Role, c) {
					return fail(c.Seq, c.Actor, NotPermitted)
				}
				if g.Collections != nil && c.Collection != "" && !slices.Contains(g.Collections, c.Collection) {
					return fail(c.Seq, c.Actor, OutsideCollections)
				}
			}
			run = nil
			return emit(commit)
		})
		switch {
		case stopped:
		case err != nil:
			yield(Entry{}, err)
		case bad != nil:
			yield(Entry{}, bad)
		case len(run) > 0:
			// Covered entries no signature vouches for, at the head.
			yield(Entry{}, &SignatureError{Seq: run[0].Seq, Actor: run[0].Actor, Problem: Unsigned})
		}
	}
}
