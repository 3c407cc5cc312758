package sequence

// Formatter renders numbers through a parsed format template exactly as a
// Sequence with that format and partition does, without a vault: use it to
// check a format before storing it with a series, or to show what numbers
// will look like. Deferred numbering (package numbering) renders its
// numbers with it. It is immutable and safe for concurrent use.
type Formatter struct {
	t *template
}

// ParseFormat parses format with the grammar of Options.Format ({seq},
// {seq:0N}, {partition.i}) against the partition tuple (components as in
// Options.Partition; none for an unpartitioned series). An empty, unknown or
// malformed template, or a {partition.i} outside the tuple, gives a
// *ValidationError.
func ParseFormat(format string, partition ...any) (*Formatter, error) {
	parts, err := normalizePartition(partition)
	if err != nil {
		return nil, err
	}
	t, err := parseFormat(format, parts)
	if err != nil {
		return nil, err
	}
	return &Formatter{t: t}, nil
}

// Format renders n.
func (f *Formatter) Format(n uint64) string { return f.t.format(n) }
