#!/bin/sh
# apt-keep-mpi.sh PACKAGE...: apt-get install the packages, and leave the
# machine's mpicc and mpiexec meaning what they did. Debian picks plain
# mpicc/mpiexec by priority among the MPIs installed (update-alternatives
# "mpi" and "mpirun"), so installing Open MPI beside MPICH would switch a
# user's mpicc to Open MPI's; gopmi's own builds name their compiler
# (mpicc.mpich, mpicc.openmpi) and need no switch.
set -eu
value() { update-alternatives --query "$1" 2>/dev/null | sed -n 's/^Value: //p'; }
mpi=$(value mpi)
run=$(value mpirun)
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
if [ -n "$mpi" ] && [ "$(value mpi)" != "$mpi" ]; then update-alternatives --set mpi "$mpi"; fi
if [ -n "$run" ] && [ "$(value mpirun)" != "$run" ]; then update-alternatives --set mpirun "$run"; fi
