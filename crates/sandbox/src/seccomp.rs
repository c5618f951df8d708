//! The seccomp filter in front of every sandboxed CLI: a classic BPF program that bubblewrap
//! installs (`--seccomp FD`) after `no_new_privs`, just before it executes the CLI, so the CLI
//! and everything it starts inherit it and cannot remove it.
//!
//! What it refuses, with `EPERM`: `ptrace` and `process_vm_readv`/`process_vm_writev` (reading
//! or steering another process of the sandbox, Corral's own proxy helper included), the
//! `io_uring_*` calls (a second system-call path that seccomp cannot see into), and `setns`.
//! `clone3` gets `ENOSYS`, so the C library falls back to `clone`, whose flags a filter can
//! read. Any other architecture than the one Corral was built for (a 32-bit binary's `int 0x80`,
//! the x32 ABI) gets `EPERM` for every call, so the numbers below cannot be bypassed.
//!
//! What it leaves to bubblewrap: new user namespaces, which `--disable-userns` refuses (see
//! `sandbox::isolation_args`), and with them the mount family, which needs a capability the
//! agent holds in no namespace.

use std::io::{self, Write};
use std::os::fd::OwnedFd;

/// `struct sock_filter`: one classic BPF instruction, in the kernel's layout (the write watch
/// hands a slice of them to `seccomp(2)` as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Instruction {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

pub const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
pub const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
pub const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
pub const RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;

/// `offsetof(struct seccomp_data, nr)` and `arch`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

/// The x32 ABI's bit in a system-call number on x86-64: such numbers are refused whole.
pub const X32_BIT: u32 = 0x4000_0000;

/// Refused with `EPERM`.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_setns,
];

/// Answered with `ENOSYS`.
const UNIMPLEMENTED: &[libc::c_long] = &[libc::SYS_clone3];

fn nr(n: libc::c_long) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A statement: an instruction that jumps nowhere.
pub fn stmt(code: u16, k: u32) -> Instruction {
    Instruction {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// `SECCOMP_RET_ERRNO` with `EPERM`.
pub fn ret_eperm() -> u32 {
    RET_ERRNO | u32::try_from(libc::EPERM).unwrap_or(1)
}

/// The start every Corral filter shares: any other architecture's calls (a 32-bit binary's
/// `int 0x80`, the x32 ABI) get `EPERM` whole, so the numbers that follow cannot be bypassed;
/// then the call's number is loaded for the comparisons.
pub fn arch_header() -> Vec<Instruction> {
    let mut out = vec![
        stmt(LD_W_ABS, ARCH_OFFSET),
        // Our architecture: skip the refusal that follows.
        Instruction {
            code: JEQ_K,
            jt: 1,
            jf: 0,
            k: AUDIT_ARCH,
        },
        stmt(RET_K, ret_eperm()),
        stmt(LD_W_ABS, NR_OFFSET),
    ];
    if cfg!(target_arch = "x86_64") {
        out.push(Instruction {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: X32_BIT,
        });
        out.push(stmt(RET_K, ret_eperm()));
    }
    out
}

/// The filter, as the instructions it is made of.
fn instructions() -> Vec<Instruction> {
    let eperm = ret_eperm();
    let enosys = RET_ERRNO | u32::try_from(libc::ENOSYS).unwrap_or(38);
    let mut out = arch_header();
    // Each listed number jumps to its return: the refusals, then the ENOSYS ones, sit after
    // the `allow`.
    let listed: Vec<(u32, bool)> = REFUSED
        .iter()
        .map(|&n| (nr(n), true))
        .chain(UNIMPLEMENTED.iter().map(|&n| (nr(n), false)))
        .collect();
    let count = listed.len();
    for (i, &(number, refused)) in listed.iter().enumerate() {
        // From instruction i of the list, the `allow` is count - i - 1 ahead; the EPERM return
        // one further, the ENOSYS return two further.
        let to_allow = count - i - 1;
        let jump = to_allow + if refused { 1 } else { 2 };
        out.push(Instruction {
            code: JEQ_K,
            jt: u8::try_from(jump).unwrap_or(u8::MAX),
            jf: 0,
            k: number,
        });
    }
    out.push(stmt(RET_K, RET_ALLOW));
    out.push(stmt(RET_K, eperm));
    out.push(stmt(RET_K, enosys));
    out
}

/// The program in the kernel's binary layout (`struct sock_filter`, native byte order), as
/// bubblewrap reads it from its `--seccomp` descriptor.
pub fn program() -> Vec<u8> {
    instructions()
        .iter()
        .flat_map(|i| {
            let mut bytes = Vec::with_capacity(8);
            bytes.extend_from_slice(&i.code.to_ne_bytes());
            bytes.push(i.jt);
            bytes.push(i.jf);
            bytes.extend_from_slice(&i.k.to_ne_bytes());
            bytes
        })
        .collect()
}

/// A close-on-exec pipe whose read end holds [`program`] and then ends (bubblewrap reads to end
/// of file): the descriptor to pass as `--seccomp`.
pub fn program_fd() -> io::Result<OwnedFd> {
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    // A few hundred bytes: far below a pipe's capacity, so this cannot block.
    std::fs::File::from(write).write_all(&program())?;
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_call_jumps_to_its_own_return() {
        let prog = instructions();
        let ret_of = |at: usize| prog[at].k;
        let allow = prog
            .iter()
            .position(|i| i.code == RET_K && i.k == RET_ALLOW)
            .unwrap();
        for (at, i) in prog.iter().enumerate().skip(4) {
            if i.code != JEQ_K {
                continue;
            }
            let target = at + 1 + usize::from(i.jt);
            let expected = if UNIMPLEMENTED.iter().any(|&n| nr(n) == i.k) {
                RET_ERRNO | libc::ENOSYS as u32
            } else {
                RET_ERRNO | libc::EPERM as u32
            };
            assert_eq!(ret_of(target), expected, "call {} at {at}", i.k);
            // Not listed: falls through to the next test, and finally to `allow`.
            assert!(at < allow);
        }
        assert_eq!(program().len(), prog.len() * 8);
    }

    /// What the kernel returns for a call `nr` from architecture `arch`: the program run on the
    /// subset of classic BPF it uses (ADR 0014: why it is not generated by seccompiler).
    fn verdict(prog: &[Instruction], arch: u32, nr: u32) -> u32 {
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code {
                LD_W_ABS if i.k == ARCH_OFFSET => acc = arch,
                LD_W_ABS if i.k == NR_OFFSET => acc = nr,
                JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                JGE_K => pc += usize::from(if acc >= i.k { i.jt } else { i.jf }),
                RET_K => return i.k,
                _ => panic!("an instruction the filter does not use: {i:?}"),
            }
        }
    }

    /// Every call of every architecture, run through the program: the listed ones get their
    /// errno, the rest pass, and any other architecture or the x32 ABI gets EPERM whole.
    #[test]
    fn the_filter_refuses_exactly_what_it_lists() {
        let prog = instructions();
        let eperm = ret_eperm();
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        for nr in 0..1024u32 {
            let expected = if REFUSED.iter().any(|&n| super::nr(n) == nr) {
                eperm
            } else if UNIMPLEMENTED.iter().any(|&n| super::nr(n) == nr) {
                enosys
            } else {
                RET_ALLOW
            };
            assert_eq!(verdict(&prog, AUDIT_ARCH, nr), expected, "call {nr}");
            // i386 (`int 0x80`) and any other architecture: refused whole.
            assert_eq!(verdict(&prog, 0x4000_0003, nr), eperm, "i386 call {nr}");
            if cfg!(target_arch = "x86_64") {
                assert_eq!(
                    verdict(&prog, AUDIT_ARCH, nr | X32_BIT),
                    eperm,
                    "x32 call {nr}"
                );
            }
        }
    }
}
