package host

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadCmdlineArgs reads <procRoot>/<pid>/cmdline as the process's argument
// vector (argv[0] first): the kernel separates the arguments with NULs and
// ends the last with one. A kernel thread or a zombie has none (empty).
func ReadCmdlineArgs(procRoot string, pid int) ([]string, error) {
	return readFile(procRoot+"/"+strconv.Itoa(pid)+"/cmdline", "", parseCmdlineArgs)
}

func parseCmdlineArgs(r io.Reader) ([]string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, nil
	}
	var args []string
	for _, a := range bytes.Split(b, []byte{0}) {
		args = append(args, string(a))
	}
	return args, nil
}

// ReadComm reads <procRoot>/<pid>/comm: the process's command name, at most
// 15 bytes (TASK_COMM_LEN − 1) of its executable's base name.
func ReadComm(procRoot string, pid int) (string, error) {
	return readFile(procRoot+"/"+strconv.Itoa(pid)+"/comm", "", parseComm)
}

func parseComm(r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b, []byte{'\n'})), nil
}

// ProcessesNamed lists, in PID order, the processes under procRoot whose
// comm is name. Processes that end while they are listed are left out.
func ProcessesNamed(procRoot, name string) ([]int, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || !e.IsDir() {
			continue
		}
		comm, err := ReadComm(procRoot, pid)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			continue // it ended meanwhile
		}
		if err != nil {
			return nil, err
		}
		if comm == name {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids, nil
}
