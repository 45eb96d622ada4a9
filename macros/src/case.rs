//! The naming conventions the macro converts between: a type's name to a
//! pipeline's (`snake_case`), a step's name to its enum variant (`pascal_case`).

/// `OrdersSync` → `orders_sync`, `HTTPFetch` → `http_fetch`.
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).map(|p| chars[p]);
            let next = chars.get(i + 1);
            let boundary = match prev {
                Some('_') => false,
                Some(p) if p.is_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_uppercase() => next.is_some_and(|n| n.is_lowercase()),
                _ => false,
            };
            if boundary {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `load_rows` → `LoadRows`.
pub(crate) fn pascal_case(name: &str) -> String {
    let mut out = String::new();
    for part in name.split('_').filter(|p| !p.is_empty()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.extend(first.to_uppercase());
            out.push_str(chars.as_str());
        }
    }
    if out.is_empty() {
        "Step".into()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases() {
        assert_eq!(snake_case("OrdersSync"), "orders_sync");
        assert_eq!(snake_case("HTTPFetch"), "http_fetch");
        assert_eq!(snake_case("Etl2Job"), "etl2_job");
        assert_eq!(snake_case("Daily_Rollup"), "daily_rollup");
        assert_eq!(snake_case("x"), "x");
        assert_eq!(pascal_case("load_rows"), "LoadRows");
        assert_eq!(pascal_case("fetch"), "Fetch");
        assert_eq!(pascal_case("step2_x"), "Step2X");
        assert_eq!(pascal_case("_private"), "Private");
    }
}
