package vault

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// A device that wrote while it had not heard of a rotation (offline, or
// before its Sync brought the keyring entries of a limited grant) holds
// records sealed by an older generation. Pushed as they are, they would
// stay so on the hub: the rotation's re-seal finished long ago, and no one
// is asked to resume it; after a limited grant they would open with the
// keys the limited person holds. So a push first re-seals locally, with
// the latest generation the keyring step learnt, the records it is about
// to push that are sealed below it: a new revision of unchanged content
// with a ledger.RecordPut entry whose Reason is ResealedReason, as a
// rotation's re-seal writes, which it then pushes. The cost is a check of
// the envelope of each record pushed, and a re-seal of those found stale.

// resealBeforePush re-seals those of the device's records got (sealed
// values by store key, as pushBatch fetched them for keys) sealed below
// the handle's current generation, and refreshes got with what it wrote.
func (s *syncRun) resealBeforePush(ctx context.Context, keys []recKey, got map[string][]byte) error {
	cur, _ := s.v.keys.current()
	if cur <= 1 {
		return nil
	}
	var stale []recKey
	var full []string
	for _, k := range keys {
		key := s.v.recordKey(k.coll, k.id)
		sealed, ok := got[key]
		if !ok {
			continue
		}
		if g, err := recordGeneration(sealed); err == nil && g < cur {
			stale = append(stale, k)
			full = append(full, key)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if isTransactor(s.v.store) {
		for i := 0; i < len(stale); i += resealBatch {
			n := min(len(stale), i+resealBatch)
			// A record that does not open is left as it is (done.bad):
			// pushBatch rejects it.
			if _, err := s.v.resealKeys(ctx, stale[i:n], cur); err != nil {
				return fmt.Errorf("re-seal before push: %w", err)
			}
		}
	} else {
		for _, k := range stale {
			if err := s.v.resealCAS(ctx, k, cur); err != nil {
				return fmt.Errorf("re-seal before push: %w", err)
			}
		}
	}
	again, err := fetch(ctx, s.v.store, full)
	if err != nil {
		return err
	}
	for _, key := range full {
		if sealed, ok := again[key]; ok {
			got[key] = sealed
		} else {
			delete(got, key) // deleted meanwhile
		}
	}
	return nil
}

// resealCAS re-seals record k with generation gen on a store without
// transactions: a compare-and-swap of the record, then its ledger entry
// (as every write there: a crash between leaves a record change the
// ledger does not show).
func (v *Vault) resealCAS(ctx context.Context, k recKey, gen uint64) error {
	if err := v.enter(ctx); err != nil {
		return err
	}
	defer v.exit()
	key := v.recordKey(k.coll, k.id)
	var e *ledger.Entry
	_, err := cas.Do(ctx, cas.Policy{}, func(int) error {
		e = nil
		it, err := v.store.Get(ctx, key)
		if errors.Is(err, stores.ErrNotFound) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return err
		}
		if g, err := recordGeneration(it.Value); err == nil && g >= gen {
			return nil // written again meanwhile
		}
		plain, rev, err := v.openRecordTx(nil, k.coll, k.id, it.Value)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", k.coll, k.id, err)
		}
		if rev == math.MaxUint64 {
			clear(plain)
			return fmt.Errorf("%s/%s: %w", k.coll, k.id, ErrRevisionOverflow)
		}
		sealed, err := v.sealRecord(k.coll, k.id, plain, rev+1)
		clear(plain)
		if err != nil {
			return closedIfWiped(err)
		}
		if _, err := v.store.CompareAndSwap(ctx, key, it.Version, sealed); err != nil {
			return err
		}
		e = &ledger.Entry{Kind: ledger.RecordPut, Collection: k.coll, ID: k.id, Revision: rev + 1,
			CipherHash: cipherHash(sealed), Reason: ResealedReason}
		return nil
	})
	if err != nil || e == nil {
		return closedIfWiped(err)
	}
	_, err = v.ledger.Append(ctx, *e)
	return closedIfWiped(err)
}
