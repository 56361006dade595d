//! [`Db`]: the store's data and the Redis commands on it, one state machine
//! for the simulated store host and the in-process store alike.

use crate::wire::resp::Frame;
use std::collections::BTreeMap;

/// What a key holds.
#[derive(Clone, Debug)]
enum Value {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
}

/// The store's data and the commands on it: the subset of Redis the engine
/// uses (`PING`, `GET`, `SET` with `NX`/`XX`/`PX`/`EX`, `DEL`, `EXISTS`,
/// `INCR`, `RPUSH`, `LPOP`, `LRANGE`), with Redis's replies.
#[derive(Default, Debug)]
pub struct Db {
    /// Each key's value and its expiry (µs of scenario time).
    keys: BTreeMap<Vec<u8>, (Value, Option<u64>)>,
    /// How many `LPOP`s returned an item: the early end's view of a reply
    /// still on its way that carries one ([`Db::pops`]).
    pops: u64,
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn err(s: impl Into<String>) -> Frame {
    Frame::Error(s.into())
}

pub(super) fn int_arg(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

impl Db {
    /// The integer `key` holds (0 when it holds none), as `GET` and a parse
    /// would read it; for keys without an expiry.
    pub(crate) fn int(&self, key: &str) -> i64 {
        match self.keys.get(key.as_bytes()) {
            Some((Value::Str(v), _)) => int_arg(v).unwrap_or(0),
            _ => 0,
        }
    }

    /// The length of the list `key` holds (0 when it holds none).
    pub(crate) fn list_len(&self, key: &str) -> usize {
        match self.keys.get(key.as_bytes()) {
            Some((Value::List(l), _)) => l.len(),
            _ => 0,
        }
    }

    /// How many `LPOP`s returned an item so far.
    pub(crate) fn pops(&self) -> u64 {
        self.pops
    }

    /// Runs `args` at `now_us`; the reply Redis would give.
    pub fn apply(&mut self, now_us: u64, args: &[Vec<u8>]) -> Frame {
        self.keys.retain(|_, (_, exp)| exp.is_none_or(|e| e > now_us));
        let Some((name, args)) = args.split_first() else { return err("ERR empty command") };
        let name = String::from_utf8_lossy(name).to_ascii_uppercase();
        let arity = |lo: usize, hi: Option<usize>| args.len() >= lo && hi.is_none_or(|h| args.len() <= h);
        let wrong = || err(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()));
        match name.as_str() {
            "PING" => Frame::Simple("PONG".into()),
            "GET" if arity(1, Some(1)) => match self.keys.get(&args[0]) {
                None => Frame::Bulk(None),
                Some((Value::Str(v), _)) => Frame::Bulk(Some(v.clone())),
                Some(_) => err(WRONGTYPE),
            },
            "SET" if arity(2, None) => self.set(now_us, args),
            "DEL" | "EXISTS" if arity(1, None) => {
                let del = name == "DEL";
                let n =
                    args.iter()
                        .filter(|k| if del { self.keys.remove(*k).is_some() } else { self.keys.contains_key(*k) });
                Frame::Int(n.count() as i64)
            }
            "INCR" if arity(1, Some(1)) => self.incr(&args[0]),
            "RPUSH" if arity(2, None) => {
                let (v, _) = self.keys.entry(args[0].clone()).or_insert((Value::List(Vec::new()), None));
                let Value::List(l) = v else { return err(WRONGTYPE) };
                l.extend(args[1..].iter().cloned());
                Frame::Int(l.len() as i64)
            }
            "LPOP" if arity(1, Some(1)) => self.lpop(&args[0]),
            "LRANGE" if arity(3, Some(3)) => self.lrange(args),
            "GET" | "SET" | "DEL" | "EXISTS" | "INCR" | "RPUSH" | "LPOP" | "LRANGE" => wrong(),
            _ => err(format!("ERR unknown command '{}'", name.to_ascii_lowercase())),
        }
    }

    /// `SET key value [NX|XX] [PX ms|EX s]`.
    fn set(&mut self, now_us: u64, args: &[Vec<u8>]) -> Frame {
        let (mut nx, mut xx, mut exp) = (false, false, None);
        let mut opts = args[2..].iter();
        while let Some(o) = opts.next() {
            match String::from_utf8_lossy(o).to_ascii_uppercase().as_str() {
                "NX" => nx = true,
                "XX" => xx = true,
                unit @ ("PX" | "EX") => {
                    let Some(n) = opts.next().and_then(|n| int_arg(n)).filter(|n| *n > 0) else {
                        return err("ERR invalid expire time in 'set' command");
                    };
                    let us = if unit == "PX" { n * 1_000 } else { n * 1_000_000 };
                    exp = Some(now_us + us as u64);
                }
                _ => return err("ERR syntax error"),
            }
        }
        if nx && xx {
            return err("ERR syntax error");
        }
        let exists = self.keys.contains_key(&args[0]);
        if (nx && exists) || (xx && !exists) {
            return Frame::Bulk(None);
        }
        self.keys.insert(args[0].clone(), (Value::Str(args[1].clone()), exp));
        Frame::Simple("OK".into())
    }

    /// `INCR key`: a missing key counts from 0.
    fn incr(&mut self, key: &[u8]) -> Frame {
        let (v, _) = self.keys.entry(key.to_vec()).or_insert((Value::Str(b"0".to_vec()), None));
        let Value::Str(s) = v else { return err(WRONGTYPE) };
        let Some(n) = int_arg(s).and_then(|n| n.checked_add(1)) else {
            return err("ERR value is not an integer or out of range");
        };
        *v = Value::Str(n.to_string().into_bytes());
        Frame::Int(n)
    }

    /// `LPOP key`: an emptied list is gone, as in Redis.
    fn lpop(&mut self, key: &[u8]) -> Frame {
        let Some((v, _)) = self.keys.get_mut(key) else { return Frame::Bulk(None) };
        let Value::List(l) = v else { return err(WRONGTYPE) };
        let first = (!l.is_empty()).then(|| l.remove(0));
        self.pops += first.is_some() as u64;
        if l.is_empty() {
            self.keys.remove(key);
        }
        Frame::Bulk(first)
    }

    /// `LRANGE key start stop`, with Redis's negative indices from the end.
    fn lrange(&self, args: &[Vec<u8>]) -> Frame {
        let (Some(start), Some(stop)) = (int_arg(&args[1]), int_arg(&args[2])) else {
            return err("ERR value is not an integer or out of range");
        };
        let l = match self.keys.get(&args[0]) {
            None => return Frame::Array(Some(Vec::new())),
            Some((Value::List(l), _)) => l,
            Some(_) => return err(WRONGTYPE),
        };
        let len = l.len() as i64;
        let norm = |i: i64| if i < 0 { (len + i).max(0) } else { i };
        let (a, b) = (norm(start), norm(stop).min(len - 1));
        let items = if a > b { Vec::new() } else { l[a as usize..=b as usize].to_vec() };
        Frame::Array(Some(items.into_iter().map(|i| Frame::Bulk(Some(i))).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(db: &mut Db, now: u64, cmd: &[&str]) -> Frame {
        db.apply(now, &cmd.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>())
    }

    fn ok() -> Frame {
        Frame::Simple("OK".into())
    }

    #[test]
    fn set_nx_sets_once_and_px_expires_in_scenario_time() {
        let mut db = Db::default();
        assert_eq!(run(&mut db, 0, &["SET", "once:a", "1", "NX", "PX", "1000"]), ok());
        assert_eq!(run(&mut db, 10, &["SET", "once:a", "2", "NX"]), Frame::Bulk(None));
        assert_eq!(run(&mut db, 10, &["GET", "once:a"]), Frame::Bulk(Some(b"1".to_vec())));
        assert_eq!(run(&mut db, 999_999, &["EXISTS", "once:a"]), Frame::Int(1));
        assert_eq!(run(&mut db, 1_000_000, &["GET", "once:a"]), Frame::Bulk(None));
        assert_eq!(run(&mut db, 1_000_000, &["SET", "once:a", "3", "XX"]), Frame::Bulk(None));
        assert_eq!(run(&mut db, 1_000_000, &["SET", "once:a", "3", "NX"]), ok());
    }

    #[test]
    fn counters_lists_and_deletes_answer_as_redis_does() {
        let mut db = Db::default();
        assert_eq!(run(&mut db, 0, &["INCR", "epoch"]), Frame::Int(1));
        assert_eq!(run(&mut db, 0, &["INCR", "epoch"]), Frame::Int(2));
        assert_eq!(run(&mut db, 0, &["RPUSH", "log", "a", "b", "c"]), Frame::Int(3));
        let bulk = |s: &str| Frame::Bulk(Some(s.as_bytes().to_vec()));
        assert_eq!(run(&mut db, 0, &["LRANGE", "log", "1", "-1"]), Frame::Array(Some(vec![bulk("b"), bulk("c")])));
        assert_eq!(run(&mut db, 0, &["LRANGE", "log", "5", "9"]), Frame::Array(Some(vec![])));
        assert_eq!(run(&mut db, 0, &["LRANGE", "none", "0", "-1"]), Frame::Array(Some(vec![])));
        assert!(matches!(run(&mut db, 0, &["INCR", "log"]), Frame::Error(e) if e.starts_with("WRONGTYPE")));
        assert!(matches!(run(&mut db, 0, &["GET", "log"]), Frame::Error(e) if e.starts_with("WRONGTYPE")));
        assert_eq!(run(&mut db, 0, &["DEL", "log", "epoch", "none"]), Frame::Int(2));
        run(&mut db, 0, &["RPUSH", "q", "a", "b"]);
        assert_eq!(run(&mut db, 0, &["LPOP", "q"]), Frame::Bulk(Some(b"a".to_vec())));
        assert_eq!(run(&mut db, 0, &["LPOP", "q"]), Frame::Bulk(Some(b"b".to_vec())));
        assert_eq!(run(&mut db, 0, &["LPOP", "q"]), Frame::Bulk(None));
        assert_eq!(run(&mut db, 0, &["EXISTS", "q"]), Frame::Int(0), "an emptied list is gone");
        assert!(matches!(run(&mut db, 0, &["SET", "k"]), Frame::Error(e) if e.contains("wrong number")));
        assert!(matches!(run(&mut db, 0, &["SET", "k", "v", "PX", "0"]), Frame::Error(_)));
        assert!(matches!(run(&mut db, 0, &["FLUSHALL"]), Frame::Error(e) if e.contains("unknown command")));
        assert_eq!(run(&mut db, 0, &["ping"]), Frame::Simple("PONG".into()));
    }
}
