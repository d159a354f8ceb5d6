package faults

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseCommandsKeepsPartialTail(t *testing.T) {
	buf := []byte("*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb")
	cmds, rest := parseCommands(buf)
	require.Equal(t, [][]string{{"INCR", "k"}}, cmds)
	require.Equal(t, "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb", string(rest))
	cmds, rest = parseCommands(append(rest, "\r\n"...))
	require.Equal(t, [][]string{{"SET", "a", "b"}}, cmds)
	require.Empty(t, rest)
}

func TestParseCommandsBinaryArgs(t *testing.T) {
	cmds, rest := parseCommands([]byte("*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\nPING\r\n"))
	require.Equal(t, [][]string{{"GET", "a\r\nb"}, {"PING"}}, cmds)
	require.Empty(t, rest)
}
