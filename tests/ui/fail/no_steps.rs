use leasehold::pipeline;

struct Empty;

#[pipeline(queue = "empty")]
impl Empty {
    async fn fetch(&self) {}
}

fn main() {
    // The methods are kept.
    let _ = Empty.fetch();
}
