// Package overlay buffers the writes of one closure over a shared store
// transaction, so that several closures can run in one transaction and a
// closure that fails is dropped without touching what the others wrote.
//
// # Usage
//
//	ov := overlay.New(tx, nil)
//	err := fn(ov) // fn reads through ov (its own writes first) and writes into ov
//	ov.Close()    // fn may not use ov any more
//	if err == nil {
//		err = ov.Apply() // fn's writes reach tx, in the order it first made them
//	}
//
// # Concurrency
//
// A Tx is not safe for concurrent use, like the transaction it covers.
package overlay

import (
	"errors"
	"slices"

	"github.com/noydb-go/noydb/stores"
)

// ErrDone is returned by a Tx used after Close: the closure it was given
// to has returned.
var ErrDone = errors.New("transaction used after its function returned")

// Tx is a stores.Tx whose writes are buffered until Apply. Reads see the
// Tx's own writes first, then the parent's. A Tx is not safe for concurrent
// use.
type Tx struct {
	parent stores.Tx
	guard  func(key string) error
	keys   []string          // keys written, in first-write order
	writes map[string][]byte // the last write of each key; nil: deleted
	done   bool
}

// New returns an empty overlay over parent. guard, if not nil, is asked
// about every key written and its error refuses the write.
func New(parent stores.Tx, guard func(key string) error) *Tx {
	return &Tx{parent: parent, guard: guard}
}

// Get returns the Tx's own write of key, or else the parent's item.
func (t *Tx) Get(key string) (stores.Item, error) {
	if t.done {
		return stores.Item{}, ErrDone
	}
	if v, ok := t.writes[key]; ok {
		if v == nil {
			return stores.Item{}, stores.ErrNotFound
		}
		return stores.Item{Key: key, Value: slices.Clone(v)}, nil
	}
	return t.parent.Get(key)
}

// Put buffers a write of value at key.
func (t *Tx) Put(key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return t.write(key, value)
}

// Delete buffers the removal of key.
func (t *Tx) Delete(key string) error { return t.write(key, nil) }

func (t *Tx) write(key string, value []byte) error {
	if t.done {
		return ErrDone
	}
	if err := stores.CheckKey(key); err != nil {
		return err
	}
	if err := stores.CheckValue(value); err != nil {
		return err
	}
	if t.guard != nil {
		if err := t.guard(key); err != nil {
			return err
		}
	}
	if t.writes == nil {
		t.writes = make(map[string][]byte)
	}
	if _, ok := t.writes[key]; !ok {
		t.keys = append(t.keys, key)
	}
	if value != nil {
		value = slices.Clone(value) // the caller may reuse its buffer
	}
	t.writes[key] = value
	return nil
}

// Close makes later uses of t fail with ErrDone. Apply still works.
func (t *Tx) Close() { t.done = true }

// Apply replays the buffered writes into the parent, in first-write order,
// each key with its last value.
func (t *Tx) Apply() error {
	for _, k := range t.keys {
		v := t.writes[k]
		var err error
		if v == nil {
			err = t.parent.Delete(k)
		} else {
			err = t.parent.Put(k, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
