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

// authorAt returns the grant under which actor wrote at position seq, a
// problem when there is none.
func (st *PeopleState) authorAt(actor string, seq uint64, vouch PeopleVouch) (GrantSpan, SignatureProblem) {
	p := st.people[actor]
	if p != nil {
		if g, ok := p.grantAt(seq); ok {
			return g, 0
		}
		if len(p.Spans) > 0 && seq >= p.Spans[0].From {
			return GrantSpan{}, Revoked // after a grant of theirs ended
		}
	}
	// Before the ledger introduced them (a person granted before this
	// ledger recorded people): as the caller vouches, until a revocation.
	if vouch == nil {
		return GrantSpan{}, UnknownSigner
	}
	v, ok := vouch(actor)
	if !ok || len(v.Key) != signingKeySize {
		return GrantSpan{}, UnknownSigner
	}
	if p != nil && p.Revoked && p.RevokedSeq <= seq {
		return GrantSpan{}, Revoked
	}
	if p != nil && slices.ContainsFunc(p.RevokedKeys, func(k []byte) bool { return bytes.Equal(k, v.Key) }) && p.RevokedSeq <= seq {
		return GrantSpan{}, Revoked
	}
	return GrantSpan{Key: v.Key, Role: v.Role}, 0
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
			g, problem := st.authorAt(e.Actor, e.Seq, vouch)
			if problem == 0 {
				for _, p := range run {
					if p.Kind == KeyringUpgraded && p.ID == e.Actor {
						g, problem = GrantSpan{Key: p.SigningKey, Role: roleOwner}, 0
					}
				}
				if e.Kind == KeyringUpgraded && e.ID == e.Actor && len(e.SigningKey) == signingKeySize {
					g = GrantSpan{Key: e.SigningKey, Role: roleOwner}
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
			if !ed25519.Verify(g.Key, msg, e.Signature) {
				return fail(e.Seq, e.Actor, BadSignature)
			}
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
