package numbering

import "github.com/noydb-go/noydb/internal/codec"

// Stored layouts added for typed deferred numbering (vault.NumberingOf),
// relative to the series' folder "_numbering/<series>/". Every value is
// sealed, bound to its key.
//
//	config                      the series' collection and format, stored by its first user
//	pending/<provisional>/<id>  a handoff entry (the same key as an Enqueue entry)
//	provisional/<provisional>   the record id a provisional id was given to, once numbered
//
// Plaintexts:
//
//	config:      [1] 1, str collection, str format
//	handoff:     [1] 2, str id       (an Enqueue entry is [1] 1, str id)
//	provisional: [1] 1, str id  (the layout of an Enqueue entry)
//
// A handoff entry is written before its record, by vault.Numbered.Put on a
// store without atomic compare-and-swap: the record is written second,
// carrying the same provisional id in its sealed marks. An Enqueue entry is
// written after its record.
const (
	configName     = "config"
	provisionalDir = "provisional/"
	handoffVersion = 2
)

func (s *Series) configKey() string { return s.dir + configName }
func (s *Series) provisionalKey(p string) string {
	return s.dir + provisionalDir + p
}

// seriesConfig is the decoded series config.
type seriesConfig struct {
	collection string
	format     string
}

func (c seriesConfig) encode() []byte {
	b := codec.AppendString([]byte{formatVersion}, c.collection)
	return codec.AppendString(b, c.format)
}

func decodeConfig(p []byte) (seriesConfig, error) {
	r := codec.NewReader(p)
	r.Version(formatVersion)
	var c seriesConfig
	c.collection = r.String(maxStr)
	c.format = r.String(maxStr)
	return c, wrapCorrupt(r.End())
}

func encodeHandoff(id string) []byte {
	return codec.AppendString([]byte{handoffVersion}, id)
}

// decodeEntry decodes a pending entry of either kind: an Enqueue entry
// (handoff false) or a handoff entry.
func decodeEntry(p []byte) (id string, handoff bool, err error) {
	if len(p) > 0 && p[0] == handoffVersion {
		r := codec.NewReader(p)
		r.Version(handoffVersion)
		id = r.String(maxStr)
		return id, true, wrapCorrupt(r.End())
	}
	id, err = decodePending(p)
	return id, false, err
}

// encodeProvisional encodes a provisional index entry: it has the layout of
// an Enqueue entry (format.go), so one encoder and one decoder serve both.
func encodeProvisional(id string) []byte { return encodePending(id) }

// decodeProvisional decodes a provisional index entry (see encodeProvisional).
func decodeProvisional(p []byte) (string, error) { return decodePending(p) }
