//! The ranks of an MPI job as an [`Exchange`]: `mpirun -np N pfcsim --mpi ...`, on one
//! machine or many alike. Through rsmpi (the `mpi` crate) over the system's MPI library.

use mpi::datatype::{Partition as Blocks, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

use super::Exchange;

/// This process's place in the job. Holds MPI initialized while it lives.
pub struct Mpi {
    world: SimpleCommunicator,
    _universe: mpi::environment::Universe,
}

impl Mpi {
    /// Initializes MPI; `None` if it was already initialized.
    pub fn init() -> Option<Mpi> {
        let universe = mpi::initialize()?;
        let world = universe.world();
        Some(Mpi { world, _universe: universe })
    }

    /// Gives `part` to rank 0; on rank 0, returns every rank's, by rank.
    pub fn gather(&self, part: &[u8]) -> Option<Vec<Vec<u8>>> {
        let root = self.world.process_at_rank(0);
        let len = part.len() as Count;
        if self.world.rank() == 0 {
            let mut counts = vec![0 as Count; self.ranks()];
            root.gather_into_root(&len, &mut counts[..]);
            let displs = offsets(&counts);
            let mut all = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
            {
                let mut blocks = PartitionMut::new(&mut all[..], counts.clone(), &displs[..]);
                root.gather_varcount_into_root(part, &mut blocks);
            }
            Some(split_by(&all, &counts))
        } else {
            root.gather_into(&len);
            root.gather_varcount_into(part);
            None
        }
    }
}

fn offsets(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let here = *at;
            *at += c;
            Some(here)
        })
        .collect()
}

fn split_by(all: &[u8], counts: &[Count]) -> Vec<Vec<u8>> {
    let mut at = 0;
    counts
        .iter()
        .map(|&c| {
            let part = all[at..at + c as usize].to_vec();
            at += c as usize;
            part
        })
        .collect()
}

impl Exchange for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn ranks(&self) -> usize {
        self.world.size() as usize
    }

    fn all_to_all(&mut self, out: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let n = self.ranks();
        let send_counts: Vec<Count> = out.iter().map(|v| v.len() as Count).collect();
        let mut recv_counts = vec![0 as Count; n];
        self.world.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let send: Vec<u8> = out.concat();
        let mut recv = vec![0u8; recv_counts.iter().map(|&c| c as usize).sum()];
        {
            let send_displs = offsets(&send_counts);
            let recv_displs = offsets(&recv_counts);
            let blocks = Blocks::new(&send[..], send_counts, &send_displs[..]);
            let mut into = PartitionMut::new(&mut recv[..], recv_counts.clone(), &recv_displs[..]);
            self.world.all_to_all_varcount_into(&blocks, &mut into);
        }
        split_by(&recv, &recv_counts)
    }
}
