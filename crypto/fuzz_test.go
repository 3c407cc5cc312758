package crypto_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/noydb-go/noydb/crypto"
)

// FuzzOpen checks that Open never panics, fails only with ErrTampered, and
// accepts nothing but canonical Seal output (no forgery): an envelope that
// opens must be exactly what sealing its plaintext under its nonce gives.
func FuzzOpen(f *testing.F) {
	for _, v := range loadVectors(f).Seal {
		f.Add([]byte(v.Key), []byte(v.Envelope), []byte(v.AD))
	}
	for _, v := range loadVectors(f).WrapKey {
		f.Add([]byte(v.KEK), []byte(v.Wrapped), []byte(v.AD))
	}
	f.Add([]byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, key, envelope, ad []byte) {
		k := keyFrom(key)
		_, _ = crypto.UnwrapKey(k, envelope, ad)
		pt, err := crypto.Open(k, envelope, ad)
		if err != nil {
			if err != crypto.ErrTampered { // the bare sentinel, never wrapped
				t.Fatalf("Open error %v is not the bare ErrTampered", err)
			}
			if pt != nil {
				t.Fatal("Open returned plaintext with an error")
			}
			return
		}
		again := crypto.SealWithNonce(k, envelope[1:1+crypto.NonceSize], pt, ad)
		if !bytes.Equal(again, envelope) {
			t.Fatal("Open accepted a non-canonical envelope")
		}
	})
}

// FuzzOpenRecord checks the same for record envelopes, and that the clear
// revision and the authenticated one agree.
func FuzzOpenRecord(f *testing.F) {
	for _, v := range loadVectors(f).SealRecord {
		f.Add([]byte(v.Key), []byte(v.Envelope), v.Vault, v.Collection, v.ID)
	}
	for _, v := range loadVectors(f).SealRecordGen {
		f.Add([]byte(v.Key), []byte(v.Envelope), v.Vault, v.Collection, v.ID)
	}
	f.Add([]byte{}, []byte{}, "", "", "")
	f.Fuzz(func(t *testing.T, key, envelope []byte, vault, collection, id string) {
		k := keyFrom(key)
		clearRev, revErr := crypto.RecordRevision(envelope)
		if revErr != nil && !errors.Is(revErr, crypto.ErrMalformed) {
			t.Fatalf("RecordRevision error %v is not ErrMalformed", revErr)
		}
		ref := crypto.RecordRef{Vault: vault, Collection: collection, ID: id}
		pt, rev, err := crypto.OpenRecord(k, envelope, ref)
		if err != nil {
			if err != crypto.ErrTampered { // the bare sentinel, never wrapped
				t.Fatalf("OpenRecord error %v is not the bare ErrTampered", err)
			}
			if pt != nil || rev != 0 {
				t.Fatal("OpenRecord returned data with an error")
			}
			return
		}
		if revErr != nil || clearRev != rev {
			t.Fatalf("authenticated revision %d, clear revision %d (%v)", rev, clearRev, revErr)
		}
		gen, genErr := crypto.RecordGeneration(envelope)
		if genErr != nil {
			t.Fatalf("an envelope that opens has no clear generation: %v", genErr)
		}
		ref.Revision, ref.Generation = rev, gen
		at := 9
		if gen != 0 {
			at = 17
		}
		again := crypto.SealRecordWithNonce(k, envelope[at:at+crypto.NonceSize], pt, ref)
		if !bytes.Equal(again, envelope) {
			t.Fatal("OpenRecord accepted a non-canonical envelope")
		}
	})
}

// FuzzParseHeader checks that ParseHeader never panics, fails only with
// ErrMalformed, and that whatever it accepts marshals back to the same bytes.
func FuzzParseHeader(f *testing.F) {
	for _, v := range loadVectors(f).Header {
		f.Add([]byte(v.Bytes))
	}
	f.Add([]byte{})
	f.Add(make([]byte, crypto.HeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := crypto.ParseHeader(b)
		if err != nil {
			if !errors.Is(err, crypto.ErrMalformed) {
				t.Fatalf("ParseHeader error %v is not ErrMalformed", err)
			}
			return
		}
		out, err := h.MarshalBinary()
		if err != nil {
			t.Fatalf("marshal a parsed header: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatal("header does not round-trip to the same bytes")
		}
	})
}
