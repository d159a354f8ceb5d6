package faults

import (
	"bytes"
	"strconv"
)

// parseCommands splits buf into whole RESP commands (arrays of bulk strings, as clients
// send them) and returns them with the unparsed rest. Inline commands are taken as one
// space-separated line.
func parseCommands(buf []byte) (cmds [][]string, rest []byte) {
	for len(buf) > 0 {
		cmd, n := parseOne(buf)
		if n == 0 {
			break
		}
		cmds = append(cmds, cmd)
		buf = buf[n:]
	}
	return cmds, buf
}

// parseOne parses one command at the start of buf, returning it and the bytes it used, or
// n == 0 when buf does not yet hold a whole command.
func parseOne(buf []byte) (cmd []string, n int) {
	line, pos, ok := readLine(buf, 0)
	if !ok {
		return nil, 0
	}
	if len(line) == 0 || line[0] != '*' {
		return bytesFields(line), pos
	}
	count, err := strconv.Atoi(string(line[1:]))
	if err != nil || count < 0 {
		return []string{}, pos // not a command we understand: pass it on unmatched
	}
	for range count {
		hdr, p, ok := readLine(buf, pos)
		if !ok {
			return nil, 0
		}
		if len(hdr) == 0 || hdr[0] != '$' {
			return []string{}, p
		}
		size, err := strconv.Atoi(string(hdr[1:]))
		if err != nil || size < 0 {
			return []string{}, p
		}
		if p+size+2 > len(buf) {
			return nil, 0
		}
		cmd = append(cmd, string(buf[p:p+size]))
		pos = p + size + 2
	}
	return cmd, pos
}

func readLine(buf []byte, from int) (line []byte, next int, ok bool) {
	i := bytes.Index(buf[from:], []byte("\r\n"))
	if i < 0 {
		return nil, 0, false
	}
	return buf[from : from+i], from + i + 2, true
}

func bytesFields(line []byte) []string {
	var out []string
	for _, f := range bytes.Fields(line) {
		out = append(out, string(f))
	}
	return out
}
