package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// An import writes a file's records in batches, each one vault transaction
// that commits its records, their numbers (--seq) and a checkpoint event
// in the ledger together: a batch is in the vault whole or not at all, and
// the last checkpoint says exactly how far the import got. A resume (the
// same command again, after a crash, a kill or an interrupt) reads it and
// goes on after it, so no record is written and no number taken twice.

// importEvent is the name of an import's checkpoint events in the ledger.
const importEvent = "noydb.import"

// defaultImportBatch is how many records one transaction writes.
const defaultImportBatch = 1000

// importCheckpoint is the data of a checkpoint event.
type importCheckpoint struct {
	// Import names the import: a hash of the vault, collection and file.
	Import string `json:"import"`
	// Offset is how many bytes of the file are imported; Records how many
	// records they held.
	Offset  int64 `json:"offset"`
	Records int64 `json:"records"`
	// Prefix is the SHA-256 of those bytes: a file changed in its imported
	// part is refused rather than resumed.
	Prefix string `json:"prefix"`
	// Done: the file was imported to its end.
	Done bool `json:"done,omitempty"`
}

// importRecord is one record of the file, ready to write.
type importRecord struct {
	n     int64 // its ordinal in the file, from 1
	line  int64 // the line it starts on
	id    string
	value []byte // compact JSON object
}

// importOptions are the flags of 'noydb import'.
type importOptions struct {
	series   string
	field    string
	idField  string
	as       string
	batch    int
	progress bool
	restart  bool
	numbered seqFlags
}

func (a *app) importCmd() *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import COLLECTION FILE",
		Short: "Write many records from a JSON lines or CSV file, resumably",
		Long: `Import the records of FILE into COLLECTION: JSON lines (one object per
line, blank lines skipped) or CSV (a header row names the fields; every
value is text). The format is told by the file's extension (.csv; .jsonl,
.ndjson or .json for JSON lines) or by --as.

Each record's id is its --id-field (a text or number field, or a CSV
column), else FILE's base name and the record's position: customers-1,
customers-2 … A record with an id the collection holds replaces it.

With --seq SERIES each record is numbered in file order, in the same commit
as the record (the number goes into --field, as with put --seq); this needs
a store with transactions (badger, postgres, mem), not a device of a hub.

Records are written in batches of --batch: each batch commits whole, with a
checkpoint in the vault's ledger, or not at all. An import stopped in any
way (Ctrl-C, a crash, kill -9) is resumed by running the same command
again: it goes on after the last checkpoint, so no record is written and no
number taken twice. A file whose imported part has changed since is
refused (--restart imports it from its start). A bad record stops the
import before its batch, naming its line; the batches before it stay.

On a terminal a progress bar follows; --progress prints a line per batch
on standard error instead. It ends with "imported N records into
COLLECTION …", or with --json {"collection", "file", "records",
"resumed_from", "first", "last", "seconds", "per_second"}.`,
		Example: `  noydb import customers customers.csv --id-field code --new
  noydb import invoices 2025.jsonl --seq invoices --date 2026-03-31
  noydb import invoices 2025.jsonl --seq invoices   # again after a crash: resumes`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runImport(cmd.Context(), args[0], args[1], &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.series, "seq", "", "number each record from this series, in file order, in the commit that writes it")
	f.StringVar(&o.field, "field", "number", "with --seq: the JSON field that receives the number")
	f.StringVar(&o.idField, "id-field", "", "the field (CSV column) whose value is each record's id (default: FILE's base name and the record's position)")
	f.StringVar(&o.as, "as", "", "the file's format: jsonl or csv (default: by its extension)")
	f.IntVar(&o.batch, "batch", defaultImportBatch, "records per transaction (and per checkpoint)")
	f.BoolVar(&o.progress, "progress", false, "print a line on standard error after each batch (a terminal shows a bar instead)")
	f.BoolVar(&o.restart, "restart", false, "import the file from its start, whatever an earlier import of it checkpointed")
	o.numbered.add(cmd)
	o.numbered.addPeriod(cmd, true, true, "to number the records in")
	o.numbered.addDefine(cmd)
	o.numbered.addDate(cmd, "with --seq: the documents' date, which picks the period")
	o.numbered.addNew(cmd, "the collection (and with --seq the series)")
	return cmd
}

// importFormat is the file's format: "jsonl" or "csv".
func (o *importOptions) format(path string) (string, error) {
	switch o.as {
	case "jsonl", "csv":
		return o.as, nil
	case "":
	default:
		return "", usagef("--as %q: want jsonl or csv", o.as)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".csv":
		return "csv", nil
	case ".jsonl", ".ndjson", ".json", "":
		return "jsonl", nil
	}
	return "", usagef("%s: not a .csv, .jsonl, .ndjson or .json file: say which with --as jsonl or --as csv", path)
}

func (a *app) runImport(ctx context.Context, collection, path string, o *importOptions) error {
	kind, err := o.format(path)
	if err != nil {
		return err
	}
	if o.batch < 1 {
		return usagef("--batch %d: want at least 1", o.batch)
	}
	if o.series == "" && (o.numbered.partition != "" || o.numbered.format != "" || o.numbered.defines()) {
		return usagef("--partition, --format, --period, --date and the definition flags need --seq")
	}
	if err := vault.CheckCollectionName(collection); err != nil {
		return usagef("%v", err)
	}
	if _, err := o.numbered.options(); err != nil {
		return err
	}
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return usagef("%s is not a regular file: an import resumes from a checkpoint in a file it can read again", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}

	v, err := a.openVault(ctx)
	if err != nil {
		return err
	}
	if _, ok := v.Store().(stores.Transactor); !ok {
		return fmt.Errorf("import: store %s has no transactions, which an import's all-or-nothing batches need: import into a badger or postgres store (or write records one by one with 'noydb put')", a.spec)
	}
	if err := a.requireCollection(ctx, v, collection, o.numbered.create, true); err != nil {
		return err
	}
	var seq *sequence.Sequence
	if o.series != "" {
		if seq, err = a.seriesHandle(ctx, &o.numbered, v, o.series); err != nil {
			return err
		}
		if o.numbered.definesSeries() {
			// The series' definition is stored (or checked) once, up
			// front: the transactions then number with a handle that
			// carries none, which reads the stored one.
			if err := seq.Declare(ctx); err != nil {
				return err
			}
			plain := o.numbered
			plain.format, plain.fiscalStart, plain.tz, plain.meta, plain.corrects = "", "", "", nil, ""
			if plain.periodKind() != "" {
				plain.period = ""
			}
			if seq, err = plain.sequence(ctx, v, o.series); err != nil {
				return err
			}
		}
	}

	id := importID(a.vaultName, collection, abs, o)
	from := importCheckpoint{Import: id}
	if !o.restart {
		if from, err = lastCheckpoint(ctx, v, id); err != nil {
			return err
		}
	}
	r, err := newImportReader(file, kind, fi.Size(), o.idField, strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)))
	if err != nil {
		return err
	}
	if seq != nil {
		r.numberField = o.field
	}
	if err := r.resume(from); err != nil {
		if errors.Is(err, errPrefixChanged) {
			return fmt.Errorf("import: %s: the %d records imported from it before (up to byte %d) are not what the file holds now: "+
				"import it from its start with --restart, or restore the file", path, from.Records, from.Offset)
		}
		return err
	}
	out := importReport{Collection: collection, File: path, ResumedFrom: from.Records}
	if from.Done {
		return a.reportImport(out, true)
	}

	coll := records(v, collection)
	bar := a.progress("import", uint64(fi.Size()))
	bar.counts = func(_, _ uint64) string { return fmt.Sprintf("%d records", out.Records+from.Records) }
	start := time.Now()
	// The next batch is read and checked while this one commits.
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	batches := r.batches(readCtx, o.batch)
	for {
		var rb readBatch
		select {
		case rb = <-batches:
		case <-ctx.Done():
			bar.done()
			return ctx.Err()
		}
		if rb.err != nil {
			bar.done()
			return rb.err
		}
		batch, done := rb.records, rb.done
		cp, err := r.checkpoint(id, rb, done)
		if err != nil {
			bar.done()
			return err
		}
		data, err := json.Marshal(cp)
		if err != nil {
			return err
		}
		var first, last uint64
		err = v.Update(ctx, func(tx *vault.Tx) error {
			first, last = 0, 0
			tc := coll.In(tx)
			for _, rec := range batch {
				if seq == nil {
					if err := tc.Put(rec.id, json.RawMessage(rec.value)); err != nil {
						return fmt.Errorf("record %d (line %d): %w", rec.n, rec.line, err)
					}
					continue
				}
				_, err := tc.PutNumbered(rec.id, seq, func(s sequence.Serial) (json.RawMessage, error) {
					if first == 0 {
						first = s.N
					}
					last = s.N
					var num any = s.N
					if s.Formatted != strconv.FormatUint(s.N, 10) {
						num = s.Formatted
					}
					return withField(rec.value, o.field, num)
				})
				if err != nil {
					return fmt.Errorf("record %d (line %d): %w", rec.n, rec.line, err)
				}
			}
			return tx.Record(importEvent, data)
		})
		if err != nil {
			bar.done()
			if len(batch) > 0 {
				return fmt.Errorf("import: batch of records %d to %d: nothing of it was written (the %d records before are): %w",
					batch[0].n, batch[len(batch)-1].n, out.Records+from.Records, err)
			}
			return fmt.Errorf("import: %w", err)
		}
		r.committed(cp)
		out.Records += int64(len(batch))
		if first != 0 {
			if out.First == 0 {
				out.First = first
			}
			out.Last = last
		}
		bar.set(uint64(cp.Offset))
		if o.progress && !a.io.errTerminal {
			fmt.Fprintf(a.io.err, "imported %d records (%d bytes of %d)\n", out.Records+from.Records, cp.Offset, fi.Size())
		}
		if done {
			break
		}
	}
	bar.done()
	out.Seconds = time.Since(start).Seconds()
	if out.Seconds > 0 {
		out.PerSecond = float64(out.Records) / out.Seconds
	}
	out.Series = o.series
	return a.reportImport(out, false)
}

// importReport is what an import prints with --json.
type importReport struct {
	Collection  string  `json:"collection"`
	File        string  `json:"file"`
	Records     int64   `json:"records"`
	ResumedFrom int64   `json:"resumed_from"`
	Series      string  `json:"series,omitempty"`
	First       uint64  `json:"first,omitempty"`
	Last        uint64  `json:"last,omitempty"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"per_second"`
}

func (a *app) reportImport(r importReport, already bool) error {
	if a.json {
		return a.printJSON(r)
	}
	if already {
		_, err := fmt.Fprintf(a.io.out, "%s was imported into %s already (%d records): nothing to do; --restart imports it again\n", r.File, r.Collection, r.ResumedFrom)
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "imported %d records into %s from %s", r.Records, r.Collection, r.File)
	if r.ResumedFrom > 0 {
		fmt.Fprintf(&b, ", resuming after the %d imported before", r.ResumedFrom)
	}
	if r.First != 0 {
		fmt.Fprintf(&b, "; numbers %d to %d of %s", r.First, r.Last, r.Series)
	}
	fmt.Fprintf(&b, " in %.1fs (%.0f records/s)\n", r.Seconds, r.PerSecond)
	_, err := io.WriteString(a.io.out, b.String())
	return err
}

// importID names an import: the vault, the collection, the file's
// absolute path and the series, so the same command finds its checkpoints.
func importID(vaultName, collection, abs string, o *importOptions) string {
	h := sha256.New()
	for _, s := range []string{vaultName, collection, abs, o.series, o.numbered.partition} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// lastCheckpoint finds the import's last checkpoint in the vault's ledger
// (the zero one when it has none). It reads the whole ledger.
func lastCheckpoint(ctx context.Context, v *vault.Vault, id string) (importCheckpoint, error) {
	cp := importCheckpoint{Import: id}
	for e, err := range v.Audit().Read(ctx, 1) {
		if err != nil {
			return cp, err
		}
		if e.Kind != ledger.AppEvent {
			continue
		}
		name, data, _ := e.Event()
		if name != importEvent {
			continue
		}
		var c importCheckpoint
		if json.Unmarshal(data, &c) == nil && c.Import == id {
			cp = c
		}
	}
	return cp, nil
}

// errPrefixChanged: the part of the file an earlier import checkpointed
// differs from what the file holds now.
var errPrefixChanged = errors.New("the imported part of the file changed")

// importReader reads a file's records in batches and keeps the hash of the
// bytes it has consumed, for the checkpoints.
type importReader struct {
	f       *os.File
	kind    string
	size    int64
	idField string
	base    string
	// numberField, with --seq: the field each record receives its number
	// in, which it must not hold already.
	numberField string

	offset  int64 // bytes consumed
	records int64
	line    int64 // lines consumed
	hashed  int64 // bytes hashed (committed)
	h       hash.Hash

	// JSON lines
	br *bufio.Reader
	// CSV
	cr      *csv.Reader
	header  []string
	crStart int64 // the file offset cr started at
}

func newImportReader(f *os.File, kind string, size int64, idField, base string) (*importReader, error) {
	r := &importReader{f: f, kind: kind, size: size, idField: idField, base: base, h: sha256.New()}
	if kind == "csv" {
		cr := csv.NewReader(bufio.NewReaderSize(f, 1<<16))
		cr.ReuseRecord = false
		header, err := cr.Read()
		if err != nil {
			return nil, fmt.Errorf("import: %s: the CSV header: %w", f.Name(), err)
		}
		if idField != "" && !containsString(header, idField) {
			return nil, usagef("--id-field %q: the CSV header has no such column (columns: %s)", idField, strings.Join(header, ", "))
		}
		r.header = header
		r.offset = cr.InputOffset()
		r.line = 1
	}
	return r, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// resume positions the reader after the checkpoint cp, checking that the
// file's bytes up to there hash as they did.
func (r *importReader) resume(cp importCheckpoint) error {
	if cp.Offset > 0 {
		if cp.Offset > r.size {
			return errPrefixChanged
		}
		if _, err := io.Copy(r.h, io.NewSectionReader(r.f, 0, cp.Offset)); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		if hex.EncodeToString(r.h.Sum(nil)) != cp.Prefix {
			return errPrefixChanged
		}
		lines, err := countLines(io.NewSectionReader(r.f, 0, cp.Offset))
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		r.offset, r.hashed, r.records, r.line = cp.Offset, cp.Offset, cp.Records, lines
	}
	if _, err := r.f.Seek(r.offset, io.SeekStart); err != nil {
		return fmt.Errorf("import: %w", err)
	}
	if r.kind == "csv" {
		r.cr = csv.NewReader(bufio.NewReaderSize(r.f, 1<<16))
		r.cr.FieldsPerRecord = len(r.header)
		r.crStart = r.offset
	} else {
		r.br = bufio.NewReaderSize(r.f, 1<<16)
	}
	return nil
}

func countLines(rd io.Reader) (int64, error) {
	var n int64
	buf := make([]byte, 1<<16)
	for {
		k, err := rd.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// readBatch is a batch of records read, with where the file stands after
// it; done is true for the last one (possibly empty).
type readBatch struct {
	records []importRecord
	offset  int64
	count   int64 // records read from the file's start, this batch's included
	done    bool
	err     error
}

// batches reads the file in batches of up to max records on a goroutine
// of its own, one batch ahead of its reader, until the end of the file,
// an error (a record that is not valid stops the import, naming its line)
// or ctx is done.
func (r *importReader) batches(ctx context.Context, max int) <-chan readBatch {
	ch := make(chan readBatch, 1)
	go func() {
		for {
			var b readBatch
			for len(b.records) < max {
				rec, ok, err := r.read()
				if err != nil {
					b.err = err
					break
				}
				if !ok {
					b.done = true
					break
				}
				b.records = append(b.records, rec)
			}
			b.offset, b.count = r.offset, r.records
			if b.err == nil && !b.done && b.offset == r.size {
				b.done = true
			}
			select {
			case ch <- b:
			case <-ctx.Done():
				return
			}
			if b.done || b.err != nil {
				return
			}
		}
	}()
	return ch
}

// read reads one record; ok is false at the end of the file.
func (r *importReader) read() (importRecord, bool, error) {
	if r.kind == "csv" {
		return r.readCSV()
	}
	for {
		raw, err := r.br.ReadBytes('\n')
		if len(raw) == 0 && err == io.EOF {
			return importRecord{}, false, nil
		}
		if err != nil && err != io.EOF {
			return importRecord{}, false, fmt.Errorf("import: %w", err)
		}
		r.offset += int64(len(raw))
		r.line++
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue
		}
		var compact bytes.Buffer
		if json.Compact(&compact, text) != nil || compact.Len() == 0 || compact.Bytes()[0] != '{' {
			return importRecord{}, false, usagef("%s, line %d: not a JSON object", r.f.Name(), r.line)
		}
		r.records++
		rec := importRecord{n: r.records, line: r.line, value: compact.Bytes()}
		if err := r.setID(&rec); err != nil {
			return importRecord{}, false, err
		}
		return rec, true, nil
	}
}

func (r *importReader) readCSV() (importRecord, bool, error) {
	row, err := r.cr.Read()
	if err == io.EOF {
		return importRecord{}, false, nil
	}
	line, _ := r.cr.FieldPos(0)
	line += int(r.line)
	if err != nil {
		return importRecord{}, false, usagef("%s, line %d: %v", r.f.Name(), line, err)
	}
	r.offset = r.crStart + r.cr.InputOffset()
	r.records++
	obj := make(map[string]string, len(row))
	for i, name := range r.header {
		obj[name] = row[i]
	}
	value, err := json.Marshal(obj)
	if err != nil {
		return importRecord{}, false, err
	}
	rec := importRecord{n: r.records, line: int64(line), value: value}
	if err := r.setID(&rec); err != nil {
		return importRecord{}, false, err
	}
	return rec, true, nil
}

// setID gives rec its id: its --id-field, else the file's base name and
// its position.
func (r *importReader) setID(rec *importRecord) error {
	if r.idField == "" {
		rec.id = r.base + "-" + strconv.FormatInt(rec.n, 10)
	} else {
		raw, ok := topField(rec.value, r.idField)
		if !ok {
			return usagef("%s, line %d: no %q field for the record's id (--id-field)", r.f.Name(), rec.line, r.idField)
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var n json.Number
			if json.Unmarshal(raw, &n) != nil {
				return usagef("%s, line %d: the id field %q holds neither text nor a number", r.f.Name(), rec.line, r.idField)
			}
			s = n.String()
		}
		rec.id = s
	}
	if err := vault.CheckID(rec.id); err != nil {
		return usagef("%s, line %d: %v", r.f.Name(), rec.line, err)
	}
	if r.numberField != "" {
		if _, ok := topField(rec.value, r.numberField); ok {
			return usagef("%s, line %d: the record has a %q field already, which --seq would number: choose another --field", r.f.Name(), rec.line, r.numberField)
		}
	}
	return nil
}

// checkpoint is the checkpoint after batch b: the bytes read since the last
// committed checkpoint are hashed on top of it (without moving the
// committed state, in case the batch does not commit).
func (r *importReader) checkpoint(id string, b readBatch, done bool) (importCheckpoint, error) {
	h := sha256.New()
	if m, ok := r.h.(interface{ MarshalBinary() ([]byte, error) }); ok {
		state, err := m.MarshalBinary()
		if err != nil {
			return importCheckpoint{}, err
		}
		if err := h.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(state); err != nil {
			return importCheckpoint{}, err
		}
	}
	if _, err := io.Copy(h, io.NewSectionReader(r.f, r.hashed, b.offset-r.hashed)); err != nil {
		return importCheckpoint{}, fmt.Errorf("import: %w", err)
	}
	return importCheckpoint{Import: id, Offset: b.offset, Records: b.count, Prefix: hex.EncodeToString(h.Sum(nil)), Done: done}, nil
}

// committed makes cp's state the reader's committed one.
func (r *importReader) committed(cp importCheckpoint) {
	_, _ = io.Copy(r.h, io.NewSectionReader(r.f, r.hashed, cp.Offset-r.hashed))
	r.hashed = cp.Offset
}

// topField returns the raw value of the top-level member key of obj, a
// compact JSON object (json.Compact's output or json.Marshal's: no
// insignificant space), without decoding the rest.
func topField(obj []byte, key string) (json.RawMessage, bool) {
	depth := 0
	for i := 0; i < len(obj); i++ {
		switch obj[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			end := stringEnd(obj, i)
			if end < 0 {
				return nil, false
			}
			if depth == 1 && end+1 < len(obj) && obj[end+1] == ':' && (obj[i-1] == '{' || obj[i-1] == ',') {
				var k string
				if json.Unmarshal(obj[i:end+1], &k) == nil && k == key {
					return json.RawMessage(obj[end+2 : valueEnd(obj, end+2)]), true
				}
			}
			i = end
		}
	}
	return nil, false
}

// stringEnd is the index of the quote that closes the string opening at
// i, or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// valueEnd is the index just after the JSON value starting at i in a
// compact object.
func valueEnd(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			if j = stringEnd(b, j); j < 0 {
				return len(b)
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j
			}
			depth--
		case ',':
			if depth == 0 {
				return j
			}
		}
	}
	return len(b)
}
