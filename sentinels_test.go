package noydb_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// TestOneSentinelPerFailure: each failure is one error value, whatever
// package's name a caller tests it with, and every typed error of the
// failure matches every name.
func TestOneSentinelPerFailure(t *testing.T) {
	failures := []struct {
		failure string
		names   map[string]error
		typed   map[string]error
	}{
		{
			failure: "tampered",
			names: map[string]error{
				"crypto.ErrTampered": crypto.ErrTampered, "ledger.ErrTampered": ledger.ErrTampered,
				"numbering.ErrTampered": numbering.ErrTampered, "vault.ErrTampered": vault.ErrTampered,
				"noydb.ErrTampered": noydb.ErrTampered,
			},
			typed: map[string]error{
				"ledger.TamperError": &ledger.TamperError{Seq: 3, Err: crypto.ErrTampered},
				"ledger.ChainError":  &ledger.ChainError{Seq: 3},
				"ledger.GapError":    &ledger.GapError{Want: 3},
			},
		},
		{
			failure: "contention",
			names: map[string]error{
				"ledger.ErrContention": ledger.ErrContention, "sequence.ErrContention": sequence.ErrContention,
				"cas.ErrExhausted": cas.ErrExhausted,
			},
			typed: map[string]error{
				"sequence.ContentionError": &sequence.ContentionError{Series: "s", Attempts: 16},
			},
		},
		{
			failure: "invalid",
			names: map[string]error{
				"sequence.ErrInvalid": sequence.ErrInvalid, "numbering.ErrInvalid": numbering.ErrInvalid,
				"vault.ErrInvalidArgument": vault.ErrInvalidArgument,
			},
			typed: map[string]error{
				"sequence.ValidationError": &sequence.ValidationError{Field: "series", Value: "", Reason: "empty"},
			},
		},
		{
			failure: "corrupt",
			names: map[string]error{
				"sequence.ErrCorrupt": sequence.ErrCorrupt, "numbering.ErrCorrupt": numbering.ErrCorrupt,
				"filestore.ErrCorrupt": filestore.ErrCorrupt, "ledger.ErrMalformed": ledger.ErrMalformed,
				"crypto.ErrMalformed": crypto.ErrMalformed,
			},
			typed: map[string]error{
				"codec.Error": &codec.Error{Off: 7, Why: "truncated"},
			},
		},
	}
	for i, f := range failures {
		t.Run(f.failure, func(t *testing.T) {
			for name, err := range f.names {
				for other, o := range f.names {
					assert.Same(t, err, o, "%s and %s are one value", name, other)
				}
				wrapped := fmt.Errorf("context: %w", err)
				for other, o := range f.names {
					assert.ErrorIs(t, wrapped, o, "wrapped %s matches %s", name, other)
				}
				// No other failure's names match.
				for j, g := range failures {
					if j == i {
						continue
					}
					for other, o := range g.names {
						assert.False(t, errors.Is(wrapped, o), "%s must not match %s", name, other)
					}
				}
			}
			for tname, terr := range f.typed {
				wrapped := fmt.Errorf("context: %w", terr)
				for name, err := range f.names {
					assert.ErrorIs(t, wrapped, err, "%s matches %s", tname, name)
				}
			}
		})
	}
}
