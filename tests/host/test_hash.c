/* The key hash is lowercase hex SHA-256. */
#include <criterion/criterion.h>
#include <sbx/sbx.h>

Test(hash, known_vectors)
{
    char h[SBX_KEY_HASH_LEN + 1];
    sbx_key_hash("", h);
    cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sbx_key_hash("abc", h);
    cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
