// Package fnv1a is 64-bit FNV-1a as a running value, continued a byte or a
// string at a time without allocating (hash/fnv needs a hasher and a
// []byte). The mock seeds and keys requests with it, replay assigns shards
// and seeds synthesized text, capture chains prompt block hashes: one
// definition, so the same bytes hash the same everywhere.
//
//	h(empty) = Offset;  h(s + b) = (h(s) XOR b) * 1099511628211  (mod 2^64)
package fnv1a

// Offset is the hash of nothing (FNV-64's offset basis).
const Offset uint64 = 14695981039346656037

const prime uint64 = 1099511628211

// AddByte continues h over one byte.
func AddByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * prime }

// AddString continues h over the bytes of s.
func AddString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * prime
	}
	return h
}

// String is the hash of s.
func String(s string) uint64 { return AddString(Offset, s) }
