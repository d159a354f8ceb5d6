// Package slot computes Redis Cluster hash slots and maps slots to the masters that own them.
//
// [Of] follows the cluster specification exactly: CRC16/XMODEM of the key, or of its hash
// tag (the bytes between the first '{' and the first '}' after it, when that span is not
// empty), modulo 16384. [TagFor] goes the other way: it returns a short tag whose slot is a
// given one, which is how packages place keys on chosen masters.
package slot

import (
	"strconv"
	"strings"
	"sync"
)

// Count is the number of hash slots in a Redis Cluster.
const Count = 16384

// crcTable is the CRC16/XMODEM table (polynomial 0x1021), built at compile time below.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// Tag returns the part of key that Redis Cluster hashes: the hash tag when the key has a
// non-empty one, otherwise the whole key.
func Tag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 { // no closing brace, or "{}": the whole key is hashed
		return key
	}
	return key[open+1 : open+1+end]
}

// Of returns the hash slot of key, as CLUSTER KEYSLOT would.
func Of(key string) uint16 {
	return crc16(Tag(key)) % Count
}

// tags holds, for every slot, the smallest decimal number whose slot it is. It is computed
// once, on first use, and never changes afterwards.
var tags = sync.OnceValue(func() *[Count]string {
	var t [Count]string
	left := Count
	for n := 0; left > 0; n++ {
		s := strconv.Itoa(n)
		if sl := crc16(s) % Count; t[sl] == "" {
			t[sl] = s
			left--
		}
	}
	return &t
})

// TagFor returns a short string whose slot is s (a decimal number), suitable as a hash tag:
// Of("{" + TagFor(s) + "}anything") == s. It panics if s >= Count.
func TagFor(s uint16) string {
	return tags()[s]
}
