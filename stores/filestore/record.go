package filestore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strings"
)

// A record file holds one key:
//
//	magic     4 bytes  "NYF1"
//	version   8 bytes  big endian
//	key size  4 bytes  big endian
//	checksum  4 bytes  CRC-32C of the version, key size, key and value
//	key
//	value
const (
	magic      = "NYF1"
	headerSize = 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeRecord lays out a record file.
func encodeRecord(key string, version uint64, value []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(key)+len(value))
	copy(b, magic)
	binary.BigEndian.PutUint64(b[4:], version)
	binary.BigEndian.PutUint32(b[12:], uint32(len(key)))
	b = append(b, key...)
	b = append(b, value...)
	sum := crc32.Update(crc32.Checksum(b[4:16], castagnoli), castagnoli, b[headerSize:])
	binary.BigEndian.PutUint32(b[16:], sum)
	return b
}

// header is the fixed part of a record file.
type header struct {
	version uint64
	keyLen  int
}

// parseHeader reads the fixed part of a record file.
func parseHeader(b []byte) (header, bool) {
	if len(b) < headerSize || string(b[:4]) != magic {
		return header{}, false
	}
	h := header{
		version: binary.BigEndian.Uint64(b[4:]),
		keyLen:  int(binary.BigEndian.Uint32(b[12:])),
	}
	if h.version == 0 || h.keyLen == 0 || h.keyLen > maxKeyLen {
		return header{}, false
	}
	return h, true
}

// decodeRecord checks a whole record file and returns its parts. The value
// aliases b.
func decodeRecord(b []byte) (key string, version uint64, value []byte, ok bool) {
	h, ok := parseHeader(b)
	if !ok || len(b) < headerSize+h.keyLen {
		return "", 0, nil, false
	}
	sum := crc32.Update(crc32.Checksum(b[4:16], castagnoli), castagnoli, b[headerSize:])
	if sum != binary.BigEndian.Uint32(b[16:]) {
		return "", 0, nil, false
	}
	return string(b[headerSize : headerSize+h.keyLen]), h.version, b[headerSize+h.keyLen:], true
}

// File names. A key of up to inlineKeyLen bytes is named by its lowercase
// hex encoding. A longer key would not fit in a file name (255 bytes on
// common file systems), so it is named by the hex of its first
// longPrefixLen bytes, a dash and the hex SHA-256 of the whole key; the full
// key is always inside the file. Only lowercase hex digits, '-' and the
// extension are used, so case-insensitive or Unicode-normalising file
// systems and sync services cannot merge two names.
const (
	ext           = ".rec"
	tempPrefix    = ".nyd-tmp-"
	inlineKeyLen  = 120 // 240 hex digits + ".rec" = 244 bytes
	longPrefixLen = 80  // 160 + 1 + 64 + 4 = 229 bytes
	maxKeyLen     = 1 << 16
)

// nameInfo is what a file name tells about its key.
type nameInfo struct {
	// key is the whole key for an inline name, or its first longPrefixLen
	// bytes for a long one.
	key  string
	long bool
}

// parseName decodes a record file name; ok is false for any other file
// (temporary files, copies made by sync tools, anything foreign).
func parseName(name string) (nameInfo, bool) {
	stem, found := strings.CutSuffix(name, ext)
	if !found {
		return nameInfo{}, false
	}
	head, sum, long := strings.Cut(stem, "-")
	if long && (len(head) != 2*longPrefixLen || len(sum) != 64 || !isLowerHex(sum)) {
		return nameInfo{}, false
	}
	if !long && (len(head) == 0 || len(head) > 2*inlineKeyLen) {
		return nameInfo{}, false
	}
	if len(head)%2 != 0 || !isLowerHex(head) {
		return nameInfo{}, false
	}
	key, err := hex.DecodeString(head)
	if err != nil {
		return nameInfo{}, false
	}
	return nameInfo{key: string(key), long: long}, true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// fileName returns the name of the record file for key.
func fileName(key string) string {
	if len(key) <= inlineKeyLen {
		return hex.EncodeToString([]byte(key)) + ext
	}
	return fmt.Sprintf("%x-%x%s", key[:longPrefixLen], sha256.Sum256([]byte(key)), ext)
}
