fn main() {
    let args: Vec<String> = std::env::args().collect();
    let plan = mcpsim::scenario::Plan::load(args[1].as_ref()).unwrap();
    let run = mcpsim::world::run(&plan, &args[2], None).unwrap();
    print!("{}", run.trace.to_jsonl());
}
